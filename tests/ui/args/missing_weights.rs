//! conv2d without its weights.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[6,6]> {
        conv2d(x)
    }
}

fn main() {}
