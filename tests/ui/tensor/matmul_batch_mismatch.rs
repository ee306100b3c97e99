//! Batch sizes 2 and 3 do not broadcast.

kiln::network! {
    net Net(a: tensor<f32[2,4,3]>, b: tensor<f32[3,3,5]>) -> tensor<f32[2,4,5]> {
        matmul(a, b)
    }
}

fn main() {}
