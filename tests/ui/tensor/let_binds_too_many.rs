//! A single-result op bound to two names.

kiln::network! {
    net Net(x: tensor<f32[2,6]>) -> tensor<f32[2,6]> {
        let (a, b) = relu(x); a
    }
}

fn main() {}
