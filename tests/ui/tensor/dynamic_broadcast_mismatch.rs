//! A run-time size only broadcasts against itself or 1.

kiln::network! {
    net Net(x: tensor<f32[10,4]>, s: tensor<i64[1]>, e: tensor<i64[1]>, y: tensor<f32[10,4]>) -> tensor<f32[?,4]> {
        add(slice(x, starts = s, ends = e, axes = [0]), y)
    }
}

fn main() {}
