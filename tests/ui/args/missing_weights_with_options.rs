//! conv2d without its weights, but with valid options (which must not be reported).

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<8xf32[8,8]> {
        conv2d(x, pad = same)
    }
}

fn main() {}
