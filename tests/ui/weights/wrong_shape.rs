//! `fc.weight` is [2, 4] in the file; this declaration needs [2, 5].

kiln::network! {
    net Net(x: vec<5xf32>) -> vec<2xf32> {
        weights "fc.safetensors";
        dense(x, fc: weights<5 -> 2>)
    }
}

fn main() {}
