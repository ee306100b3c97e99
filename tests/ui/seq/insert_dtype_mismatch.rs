//! A sequence's elements share one dtype: an f64 tensor does not go into an f32 sequence.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f64[2,3]>) -> tensor<f32[2,3]> {
        let s = seq_construct(x);
        let s = insert(s, y);
        at(s, 0)
    }
}

fn main() {}
