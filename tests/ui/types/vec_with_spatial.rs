//! A vector has no spatial sizes.

kiln::network! {
    net Net(x: fm<4xf32[2,2]>) -> vec<16xf32[1,1]> {
        flatten(x)
    }
}

fn main() {}
