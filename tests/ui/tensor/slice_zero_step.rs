//! A slice step of 0 never ends.

kiln::network! {
    net Net(x: tensor<f32[4,5]>) -> tensor<f32[4,5]> {
        slice(x, starts = [0], ends = [4], steps = [0])
    }
}

fn main() {}
