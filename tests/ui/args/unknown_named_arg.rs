//! `strides` is a typo for `stride`.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<3xf32[4,4]> {
        max_pool(x, 2x2, strides = 2)
    }
}

fn main() {}
