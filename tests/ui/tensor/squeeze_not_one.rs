//! Only size-1 axes can be squeezed.

kiln::network! {
    net Net(x: tensor<f32[1,3,1]>) -> tensor<f32[1,3]> {
        squeeze(x, axes = [1])
    }
}

fn main() {}
