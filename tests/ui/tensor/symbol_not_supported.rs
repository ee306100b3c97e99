//! Named sizes need a list of shapes to compile, which is not supported yet.

kiln::network! {
    net Net(x: tensor<f32[n,3]>) -> tensor<f32[2,3]> {
        relu(x)
    }
}

fn main() {}
