//! seq_construct of tensors of two dtypes.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<i64[2,3]>) -> tensor<f32[2,3]> {
        let s = seq_construct(x, y);
        at(s, 0)
    }
}

fn main() {}
