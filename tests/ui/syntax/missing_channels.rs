//! A type needs channels and dtype together, like `4xf32`.

kiln::network! {
    net Net(x: vec<f32>) -> vec<4xf32> {
        relu(x)
    }
}

fn main() {}
