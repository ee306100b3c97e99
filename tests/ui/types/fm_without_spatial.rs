//! A feature map needs its height and width.

kiln::network! {
    net Net(x: vec<4xf32>) -> fm<4xf32> {
        relu(x)
    }
}

fn main() {}
