//! at takes a sequence, not a tensor.

kiln::network! {
    net Net(x: tensor<f32[2,3]>) -> tensor<f32[3]> {
        at(x, 0)
    }
}

fn main() {}
