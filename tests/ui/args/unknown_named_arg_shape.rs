//! `strides` is a typo for `stride`; the output type is written for the stride the user meant,
//! so the typo must be the only error (the unknown argument makes the shape unknowable).

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[3,3]> {
        conv2d(x, conv1: weights<3 -> 3x3xf32 -> 8>, strides = 2)
    }
}

fn main() {}
