//! An in-place write over a value the network also returns.

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> (tensor<f32[4,8]>, tensor<f32[4,8]>) {
        let h = mul(x, 2.0);
        let r = h.relu_();
        (h, r)
    }
}

fn main() {}
