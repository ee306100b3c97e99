//! Inputs have their sizes; `?` is for outputs.

kiln::network! {
    net Net(x: tensor<f32[?,4]>) -> tensor<f32[?,4]> {
        relu(x)
    }
}

fn main() {}
