//! Only one weights file per network.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<2xf32> {
        weights "fc.safetensors";
        weights "fc.safetensors";
        dense(x, fc: weights<4 -> 2>)
    }
}

fn main() {}
