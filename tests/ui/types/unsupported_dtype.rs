//! kiln computes in f32; an i8 input is not supported.

kiln::network! {
    net Net(x: fm<3xi8[8,8]>) -> fm<3xf32[8,8]> {
        relu(x)
    }
}

fn main() {}
