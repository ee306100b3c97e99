//! concat joins along channels; the spatial sizes (8x8 and 4x4) must agree.

kiln::network! {
    net Net(x: fm<4xf32[8,8]>, y: fm<4xf32[4,4]>) -> fm<8xf32[8,8]> {
        concat(x, y)
    }
}

fn main() {}
