//! A view keeps its buffer's dtype: reading f32 bytes as i64 is refused.

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> tensor<i64[16]> {
        let h = relu(x);
        view(h, tensor<i64[16]>)
    }
}

fn main() {}
