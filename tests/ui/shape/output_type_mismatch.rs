//! The network computes 5 features but declares 10.

kiln::network! {
    net Net(x: vec<20xf32>) -> vec<10xf32> {
        dense(x, fc: weights<20 -> 5>)
    }
}

fn main() {}
