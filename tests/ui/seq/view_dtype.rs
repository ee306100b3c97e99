//! A view may change dtype, but not into bools: f32 bytes are not all valid bools.

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> tensor<bool[16]> {
        let h = relu(x);
        view(h, tensor<bool[16]>)
    }
}

fn main() {}
