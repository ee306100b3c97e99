//! cast names a dtype.

kiln::network! {
    net Net(x: tensor<f32[3]>) -> tensor<f32[3]> {
        cast(x, f16)
    }
}

fn main() {}
