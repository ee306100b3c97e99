//! 4x4x4 = 64 elements cannot be reshaped into 4x3x3 = 36.

kiln::network! {
    net Net(x: fm<4xf32[4,4]>) -> fm<4xf32[3,3]> {
        reshape(x, fm<4xf32[3,3]>)
    }
}

fn main() {}
