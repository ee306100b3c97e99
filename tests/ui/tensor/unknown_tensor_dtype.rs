//! An unknown dtype in a tensor type.

kiln::network! {
    net Net(x: tensor<f16[3]>) -> tensor<f16[3]> {
        x
    }
}

fn main() {}
