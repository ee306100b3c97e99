//! add needs two inputs.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<4xf32> {
        add(x)
    }
}

fn main() {}
