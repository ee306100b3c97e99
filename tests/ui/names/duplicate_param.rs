//! Two layers share the parameter name `conv1`, so they would read the same tensors.

kiln::network! {
    net Net(x: fm<8xf32[8,8]>) -> fm<8xf32[4,4]> {
        let h = conv2d(x, conv1: weights<8 -> 3x3xf32 -> 8>);
        conv2d(h, conv1: weights<8 -> 3x3xf32 -> 8>)
    }
}

fn main() {}
