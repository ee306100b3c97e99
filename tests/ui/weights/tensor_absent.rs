//! The file has `fc.*`; the layer is called `fc1`.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<2xf32> {
        weights "fc.safetensors";
        dense(x, fc1: weights<4 -> 2>, bias = false)
    }
}

fn main() {}
