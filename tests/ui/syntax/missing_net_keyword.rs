//! The network starts with `net`, not `fn`.

kiln::network! {
    fn Net(x: vec<4xf32>) -> vec<4xf32> {
        relu(x)
    }
}

fn main() {}
