//! split_to_seq: the sizes must add up to the axis.

kiln::network! {
    net Net(x: tensor<f32[2,6]>) -> tensor<i64[]> {
        let s = split_to_seq(x, [2, 3], axis = 1);
        len(s)
    }
}

fn main() {}
