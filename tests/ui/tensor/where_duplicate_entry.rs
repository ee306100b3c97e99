//! The same shape listed twice.

kiln::network! {
    net Net(x: tensor<f32[n,3]>) -> tensor<f32[n,3]> where n in [1, 2, 1] {
        relu(x)
    }
}

fn main() {}
