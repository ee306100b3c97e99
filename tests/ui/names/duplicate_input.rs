//! Two inputs are both called `x`.

kiln::network! {
    net Net(x: vec<4xf32>, x: vec<4xf32>) -> vec<4xf32> {
        relu(x)
    }
}

fn main() {}
