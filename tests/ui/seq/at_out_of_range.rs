//! A position written as a number is checked at compile time, at the number.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f32[2,3]>, z: tensor<f32[2,3]>) -> tensor<f32[2,3]> {
        let s = seq_construct(x, y, z);
        at(s, 3)
    }
}

fn main() {}
