//! No size times 5 holds 24 elements.

kiln::network! {
    net Net(x: tensor<f32[2,3,4]>) -> tensor<f32[5,4]> {
        reshape(x, [5, -1])
    }
}

fn main() {}
