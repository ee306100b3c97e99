//! insert may append (position len) but not go past the end.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f32[2,3]>) -> tensor<f32[2,3]> {
        let s = seq_construct(x, y);
        let s = insert(s, x, 3);
        at(s, 0)
    }
}

fn main() {}
