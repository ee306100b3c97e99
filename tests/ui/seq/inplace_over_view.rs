//! In place over a view inside a larger buffer: the view's bytes are not a buffer of their own.

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> tensor<f32[2,8]> {
        let h = mul(x, 2.0);
        let v = view(h, tensor<f32[2,8]>, offset = 16);
        v.relu_()
    }
}

fn main() {}
