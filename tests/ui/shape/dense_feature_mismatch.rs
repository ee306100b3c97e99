//! The flattened feature map has 4*3*3 = 36 features, the weights say 32.

kiln::network! {
    net Net(x: fm<4xf32[3,3]>) -> vec<10xf32> {
        dense(flatten(x), fc: weights<32 -> 10>)
    }
}

fn main() {}
