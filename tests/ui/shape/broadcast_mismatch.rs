//! 4x4 and 3x3 feature maps do not broadcast.

kiln::network! {
    net Net(a: fm<8xf32[4,4]>, b: fm<8xf32[3,3]>) -> fm<8xf32[4,4]> {
        add(a, b)
    }
}

fn main() {}
