//! Every named size must be listed.

kiln::network! {
    net Net(x: tensor<f32[n,m]>) -> tensor<f32[n,m]> where n in [1, 2] {
        relu(x)
    }
}

fn main() {}
