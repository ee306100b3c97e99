//! A view that changes dtype reads a tensor the network computes, not a model input (whose
//! alignment the caller decides).

kiln::network! {
    net Net(x: tensor<f32[4,8]>) -> tensor<i32[32]> {
        let b = view(x, tensor<i32[32]>);
        add(b, 1)
    }
}

fn main() {}
