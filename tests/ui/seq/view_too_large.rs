//! A declared view must fit in its buffer (TVM DeclBuffer's rule).

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> tensor<f32[3,8]> {
        let h = relu(x);
        view(h, tensor<f32[3,8]>, offset = 16)
    }
}

fn main() {}
