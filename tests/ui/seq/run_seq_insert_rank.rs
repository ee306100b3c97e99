//! insert into a sequence input of any length: the tensor must have the element type's rank.

kiln::network! {
    net Net(s: seq<tensor<f32[?,3]>>, x: tensor<f32[3]>) -> tensor<i64[]> {
        len(insert(s, x))
    }
}

fn main() {}
