//! A view that changes dtype starts on a boundary of its dtype: f32 element 1 is byte 4, and
//! an i64 needs 8.

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> tensor<i64[4]> {
        let h = relu(x);
        view(h, tensor<i64[4]>, offset = 1)
    }
}

fn main() {}
