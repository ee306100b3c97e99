//! Axis -4 does not exist in a rank-3 tensor.

kiln::network! {
    net Net(x: tensor<f32[2,3,4]>) -> tensor<f32[2,3,4]> {
        softmax(x, axis = -4)
    }
}

fn main() {}
