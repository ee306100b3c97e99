//! A [2,3] and a [4] tensor do not broadcast.

kiln::network! {
    net Net(a: tensor<f32[2,3]>, b: tensor<f32[4]>) -> tensor<f32[2,3]> {
        add(a, b)
    }
}

fn main() {}
