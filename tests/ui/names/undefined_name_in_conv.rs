//! `y` was never bound; it is the input of a conv2d that has weights and options.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[8,8]> {
        conv2d(y, conv1: weights<3 -> 3x3xf32 -> 8>, pad = same)
    }
}

fn main() {}
