//! `relu` is an operation, not a value: it needs `relu(...)`.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<4xf32> {
        add(x, relu)
    }
}

fn main() {}
