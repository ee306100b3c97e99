//! dense takes a vector; a feature map must be flattened first.

kiln::network! {
    net Net(x: fm<4xf32[2,2]>) -> vec<10xf32> {
        dense(x, fc: weights<16 -> 10>)
    }
}

fn main() {}
