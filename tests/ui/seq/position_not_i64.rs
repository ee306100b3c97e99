//! A run-time position is an i64 scalar.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, p: tensor<f32[]>) -> tensor<f32[2,3]> {
        let s = seq_construct(x, x);
        at(s, p)
    }
}

fn main() {}
