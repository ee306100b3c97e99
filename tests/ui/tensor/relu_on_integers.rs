//! Activations compute in f32.

kiln::network! {
    net Net(x: tensor<i64[3]>) -> tensor<i64[3]> {
        relu(x)
    }
}

fn main() {}
