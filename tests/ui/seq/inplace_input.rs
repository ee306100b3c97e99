//! An in-place write over a model input, which is read-only.

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> tensor<f32[4,8]> {
        x.relu_()
    }
}

fn main() {}
