//! The weights file is a PyTorch checkpoint (a zip archive), not safetensors.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<2xf32> {
        weights "model.pt";
        dense(x, fc: weights<4 -> 2>)
    }
}

fn main() {}
