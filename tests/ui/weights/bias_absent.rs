//! The file has `fc.weight` but no `fc.bias`.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<2xf32> {
        weights "fc_no_bias.safetensors";
        dense(x, fc: weights<4 -> 2>)
    }
}

fn main() {}
