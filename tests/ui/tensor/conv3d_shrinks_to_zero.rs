//! A 3x3x3 window does not fit a volume only 2 deep (no padding).

kiln::network! {
    net Net(x: tensor<f32[1, 2, 2, 8, 8]>) -> tensor<f32[1, 4, 1, 6, 6]> {
        conv(x, c1: weights<2 -> 3x3x3xf32 -> 4>)
    }
}

fn main() {}
