//! `.rellu()` is a typo for `.relu()`.

kiln::network! {
    net Net(x: vec<20xf32>) -> vec<5xf32> {
        dense(x, fc: weights<20 -> 5>).rellu()
    }
}

fn main() {}
