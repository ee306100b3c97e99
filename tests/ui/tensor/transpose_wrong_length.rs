//! The permutation has 2 entries for 3 axes.

kiln::network! {
    net Net(x: tensor<f32[2,3,4]>) -> tensor<f32[3,2,4]> {
        transpose(x, [1, 0])
    }
}

fn main() {}
