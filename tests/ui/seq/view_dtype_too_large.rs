//! A view that changes dtype must fit in its buffer's bytes: 17 i64 are 136 bytes, `h` has 128.

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> tensor<i64[17]> {
        let h = relu(x);
        view(h, tensor<i64[17]>)
    }
}

fn main() {}
