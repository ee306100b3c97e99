//! Pooling needs a feature map, not a vector.

kiln::network! {
    net Net(x: vec<16xf32>) -> vec<16xf32> {
        max_pool(x, 2x2)
    }
}

fn main() {}
