//! A value with a run-time size cannot feed an op that needs static sizes.

kiln::network! {
    net Net(x: tensor<f32[10,4]>, s: tensor<i64[1]>, e: tensor<i64[1]>) -> tensor<f32[4,?]> {
        transpose(slice(x, starts = s, ends = e, axes = [0]), [1, 0])
    }
}

fn main() {}
