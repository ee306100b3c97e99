//! groups = 3 does not divide 8 input channels.

kiln::network! {
    net Net(x: fm<8xf32[4,4]>) -> fm<8xf32[4,4]> {
        conv2d(x, dw: weights<8 -> 3x3xf32 -> 8>, groups = 3, pad = same)
    }
}

fn main() {}
