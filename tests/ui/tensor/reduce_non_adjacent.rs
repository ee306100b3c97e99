//! Reducing axes 0 and 2 (both larger than 1) at once is not supported yet.

kiln::network! {
    net Net(x: tensor<f32[2,3,4]>) -> tensor<f32[1,3,1]> {
        reduce_mean(x, axes = [0, 2])
    }
}

fn main() {}
