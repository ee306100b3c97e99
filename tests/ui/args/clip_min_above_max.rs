//! clip's bounds are the wrong way round.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<4xf32> {
        clip(x, min = 6.0, max = 0.0)
    }
}

fn main() {}
