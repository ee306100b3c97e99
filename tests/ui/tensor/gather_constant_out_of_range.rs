//! A constant index is checked at compile time.

kiln::network! {
    net Net(x: tensor<f32[4,5]>) -> tensor<f32[2,5]> {
        gather(x, [1, 4], axis = 0)
    }
}

fn main() {}
