//! relu takes one input.

kiln::network! {
    net Net(x: vec<4xf32>, y: vec<4xf32>) -> vec<4xf32> {
        relu(x, y)
    }
}

fn main() {}
