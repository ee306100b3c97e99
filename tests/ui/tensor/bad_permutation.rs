//! A permutation must name every axis once.

kiln::network! {
    net Net(x: tensor<f32[2,3,4]>) -> tensor<f32[4,3,2]> {
        transpose(x, [2, 1, 1])
    }
}

fn main() {}
