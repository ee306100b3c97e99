//! A sequence is not a tensor: an elementwise op on it is an error at the argument.

kiln::network! {
    net Net(x: tensor<f32[2,3]>) -> tensor<f32[2,3]> {
        let s = seq_construct(x, x);
        relu(s)
    }
}

fn main() {}
