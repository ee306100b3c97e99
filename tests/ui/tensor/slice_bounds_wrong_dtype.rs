//! Run-time slice bounds are i64 tensors, one entry per axis.

kiln::network! {
    net Net(x: tensor<f32[10,4]>, s: tensor<i32[1]>, e: tensor<i64[1]>) -> tensor<f32[?,4]> {
        slice(x, starts = s, ends = e, axes = [0])
    }
}

fn main() {}
