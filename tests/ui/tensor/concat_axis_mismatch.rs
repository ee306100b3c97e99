//! Concat along axis 2: the other sizes must agree.

kiln::network! {
    net Net(a: tensor<f32[2,3,4]>, b: tensor<f32[2,4,4]>) -> tensor<f32[2,3,8]> {
        concat(a, b, axis = 2)
    }
}

fn main() {}
