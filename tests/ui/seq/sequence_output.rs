//! A network returns tensors, not sequences: the output type is the error.

kiln::network! {
    net Net(x: tensor<f32[2,3]>) -> tensor<f32[2,3]> {
        seq_construct(x, x)
    }
}

fn main() {}
