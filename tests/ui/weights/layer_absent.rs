//! The file has `fc.*`; the layer is called `head`, so neither of its tensors is there.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<2xf32> {
        weights "fc.safetensors";
        dense(x, head: weights<4 -> 2>)
    }
}

fn main() {}
