//! conv2d weights in f16 are not supported.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[6,6]> {
        conv2d(x, conv1: weights<3 -> 3x3xf16 -> 8>)
    }
}

fn main() {}
