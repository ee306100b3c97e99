//! conv2d's weights expect 4 input channels, but the feature map has 3.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[6,6]> {
        conv2d(x, conv1: weights<4 -> 3x3xf32 -> 8>)
    }
}

fn main() {}
