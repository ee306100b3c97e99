//! Axis 3 does not exist in a rank-3 tensor.

kiln::network! {
    net Net(x: tensor<f32[2,3,4]>) -> tensor<f32[2,3,1]> {
        reduce_sum(x, axes = [3])
    }
}

fn main() {}
