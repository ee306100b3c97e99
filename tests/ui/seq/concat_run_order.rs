//! After an insert at a run-time position the order is a run-time fact: concat_from_seq needs it at compile time.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f32[2,3]>, p: tensor<i64[]>) -> tensor<f32[4,3]> {
        let s = seq_construct(x);
        let s = insert(s, y, p);
        concat_from_seq(s, axis = 0)
    }
}

fn main() {}
