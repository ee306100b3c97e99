//! `3y3` is not a kernel size.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<3xf32[6,6]> {
        max_pool(x, 3y3, stride = 1)
    }
}

fn main() {}
