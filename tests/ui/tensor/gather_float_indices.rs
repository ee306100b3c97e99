//! Indices are integers.

kiln::network! {
    net Net(x: tensor<f32[4,5]>, i: tensor<f32[2]>) -> tensor<f32[2,5]> {
        gather(x, i, axis = 0)
    }
}

fn main() {}
