//! `tensor` is not a kiln type.

kiln::network! {
    net Net(x: tensor<4xf32>) -> vec<4xf32> {
        relu(x)
    }
}

fn main() {}
