//! `conv2` is a typo for `conv2d`.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[6,6]> {
        conv2(x, conv1: weights<3 -> 3x3xf32 -> 8>)
    }
}

fn main() {}
