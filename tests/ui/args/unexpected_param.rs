//! relu has no parameters.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<4xf32> {
        relu(x, w: weights<4 -> 4>)
    }
}

fn main() {}
