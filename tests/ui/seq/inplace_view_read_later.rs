//! An in-place write over a buffer that an older view of it still reads.

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> tensor<f32[2,8]> {
        let h = mul(x, 2.0);
        let v = view(h, tensor<f32[2,8]>, offset = 0);
        let r = h.sigmoid_();
        add(v, 1.0)
    }
}

fn main() {}
