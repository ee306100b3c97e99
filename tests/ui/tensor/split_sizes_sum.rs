//! Split sizes must add up to the size along the axis.

kiln::network! {
    net Net(x: tensor<f32[2,6]>) -> tensor<f32[2,2]> {
        let (a, b) = split(x, axis = 1, sizes = [2, 3]); add(a, b)
    }
}

fn main() {}
