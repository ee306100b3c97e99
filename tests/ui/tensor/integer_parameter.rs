//! Parameters are f32 for now.

kiln::network! {
    net Net(x: tensor<f32[3]>) -> tensor<f32[3]> {
        add(x, b: tensor<i64[3]>)
    }
}

fn main() {}
