//! erase after erase: the sequence is shorter than the position says.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f32[2,3]>, z: tensor<f32[2,3]>) -> tensor<f32[2,3]> {
        let s = seq_construct(x, y, z);
        let s = erase(s, 0);
        let s = erase(s, -3);
        at(s, 0)
    }
}

fn main() {}
