//! add_ must keep its first argument's shape: broadcasting to a larger result cannot be in place.

kiln::network! {
    net Net(x: tensor<f32[1,8]>, y: tensor<f32[4,8]>) -> tensor<f32[4,8]> {
        let h = mul(x, 2.0);
        add_(h, y)
    }
}

fn main() {}
