//! at with a run-time position copies the chosen element: the candidates must have one shape.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f32[1,3]>, p: tensor<i64[]>) -> tensor<f32[2,3]> {
        let s = seq_construct(x, y);
        at(s, p)
    }
}

fn main() {}
