//! Negative positions count from the end; -4 is before the first of three.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f32[2,3]>, z: tensor<f32[2,3]>) -> tensor<f32[2,3]> {
        let s = seq_construct(x, y, z);
        at(s, -4)
    }
}

fn main() {}
