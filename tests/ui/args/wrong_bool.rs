//! `bias` is `true` or `false`, not a number.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<2xf32> {
        dense(x, fc: weights<4 -> 2>, bias = 0)
    }
}

fn main() {}
