//! Only one size may be inferred.

kiln::network! {
    net Net(x: tensor<f32[2,3,4]>) -> tensor<f32[6,4]> {
        reshape(x, [-1, -1])
    }
}

fn main() {}
