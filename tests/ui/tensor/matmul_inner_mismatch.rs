//! [2,3] times [4,5]: the inner sizes differ.

kiln::network! {
    net Net(a: tensor<f32[2,3]>, b: tensor<f32[4,5]>) -> tensor<f32[2,5]> {
        matmul(a, b)
    }
}

fn main() {}
