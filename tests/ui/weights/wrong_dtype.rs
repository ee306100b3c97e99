//! `fc.weight` is F16 in the file; kiln reads F32.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<2xf32> {
        weights "fc_f16.safetensors";
        dense(x, fc: weights<4 -> 2>)
    }
}

fn main() {}
