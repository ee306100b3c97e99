//! matmul needs matrices (at least 2 dimensions) for now.

kiln::network! {
    net Net(a: tensor<f32[3]>, b: tensor<f32[3,5]>) -> tensor<f32[5]> {
        matmul(a, b)
    }
}

fn main() {}
