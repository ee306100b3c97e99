//! max_pool without its window size.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<3xf32[4,4]> {
        max_pool(x)
    }
}

fn main() {}
