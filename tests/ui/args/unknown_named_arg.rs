//! `strides` is a typo for `stride`.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[3,3]> {
        conv2d(x, conv1: weights<3 -> 3x3xf32 -> 8>, strides = 2)
    }
}

fn main() {}
