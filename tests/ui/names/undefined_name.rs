//! `y` was never bound.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<4xf32> {
        let h = relu(x);
        add(h, y)
    }
}

fn main() {}
