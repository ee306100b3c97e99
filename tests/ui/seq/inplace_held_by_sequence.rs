//! An in-place write over a tensor that a sequence still in use holds.

kiln::network! {
    net Net(x: tensor<f32[4,8]>, y: tensor<f32[4,8]>) -> tensor<f32[8,8]> {
        let h = mul(x, 2.0);
        let s = seq_construct(h, y);
        let r = tanh_(h);
        concat_from_seq(s, axis = 0)
    }
}

fn main() {}
