//! The weights file does not exist (paths are relative to this file).

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<2xf32> {
        weights "missing.safetensors";
        dense(x, fc: weights<4 -> 2>)
    }
}

fn main() {}
