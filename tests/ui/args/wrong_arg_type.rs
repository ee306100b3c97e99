//! `same` is a padding mode, not a stride.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[6,6]> {
        conv2d(x, conv1: weights<3 -> 3x3xf32 -> 8>, stride = same)
    }
}

fn main() {}
