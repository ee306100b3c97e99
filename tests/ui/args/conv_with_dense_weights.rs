//! conv2d weights need a kernel size.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[8,8]> {
        conv2d(x, conv1: weights<3 -> 8>)
    }
}

fn main() {}
