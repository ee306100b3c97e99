//! A 1-D convolution's padding is one number or `(begin, end)`, not three numbers.

kiln::network! {
    net Net(x: tensor<f32[1, 4, 32]>) -> tensor<f32[1, 8, 32]> {
        conv(x, c1: weights<4 -> 3xf32 -> 8>, pad = (1, 1, 1))
    }
}

fn main() {}
