//! A pooling window that can lie entirely in padding sees no input (ONNX rejects it too).

kiln::network! {
    net Net(x: fm<4xf32[8,8]>) -> fm<4xf32[9,9]> {
        max_pool(x, 2x2, stride = 1, pad = 2)
    }
}

fn main() {}
