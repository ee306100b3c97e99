//! `f23` is a typo for `f32`.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<4xf23> {
        relu(x)
    }
}

fn main() {}
