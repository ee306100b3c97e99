//! `?` sizes need run-time shapes, which are not supported yet.

kiln::network! {
    net Net(x: tensor<f32[2,?]>) -> tensor<f32[2,3]> {
        relu(x)
    }
}

fn main() {}
