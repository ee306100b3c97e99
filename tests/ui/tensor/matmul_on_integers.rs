//! matmul computes in f32 or f64.

kiln::network! {
    net Net(a: tensor<i32[2,3]>, b: tensor<i32[3,2]>) -> tensor<i32[2,2]> {
        matmul(a, b)
    }
}

fn main() {}
