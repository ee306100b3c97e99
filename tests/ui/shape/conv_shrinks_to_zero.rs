//! A 5x5 kernel does not fit in a 4x4 feature map without padding.

kiln::network! {
    net Net(x: fm<3xf32[4,4]>) -> fm<8xf32[1,1]> {
        conv2d(x, conv1: weights<3 -> 5x5xf32 -> 8>)
    }
}

fn main() {}
