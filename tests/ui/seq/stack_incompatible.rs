//! concat_from_seq with new_axis stacks elements, which must have one shape.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f32[3,3]>) -> tensor<f32[2,2,3]> {
        let s = seq_construct(x, y);
        concat_from_seq(s, axis = 0, new_axis = true)
    }
}

fn main() {}
