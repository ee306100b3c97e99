//! A sum over an axis of size 0 would compute a result from no elements: refused at the input.

kiln::network! {
    net Net(x: tensor<f32[0,4]>) -> tensor<f32[1,4]> {
        reduce_sum(x, axes = [0])
    }
}

fn main() {}
