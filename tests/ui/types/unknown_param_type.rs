//! Parameters are `weights<...>` or `norm<...>`.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<2xf32> {
        dense(x, fc: matrix<4 -> 2>)
    }
}

fn main() {}
