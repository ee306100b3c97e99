//! The network declares two outputs but returns one value.

kiln::network! {
    net Net(x: vec<4xf32>) -> (vec<4xf32>, vec<4xf32>) {
        relu(x)
    }
}

fn main() {}
