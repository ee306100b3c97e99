//! Erasing from an empty sequence.

kiln::network! {
    net Net(x: tensor<f32[2,3]>) -> tensor<f32[2,3]> {
        let s = seq_empty(f32);
        let s = erase(s);
        relu(x)
    }
}

fn main() {}
