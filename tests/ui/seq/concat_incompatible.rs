//! concat_from_seq: the elements differ on an axis other than the concatenation axis.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f32[2,4]>) -> tensor<f32[4,3]> {
        let s = seq_construct(x, y);
        concat_from_seq(s, axis = 0)
    }
}

fn main() {}
