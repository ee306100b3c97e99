//! A named size needs the values to compile it for.

kiln::network! {
    net Net(x: tensor<f32[n,3]>) -> tensor<f32[n,3]> {
        relu(x)
    }
}

fn main() {}
