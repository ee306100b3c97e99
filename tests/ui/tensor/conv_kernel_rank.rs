//! `conv` takes its dimensionality from the kernel: a 3x3 kernel is 2-D, but the input is a
//! 1-D sequence `[N, C, L]`.

kiln::network! {
    net Net(x: tensor<f32[1, 4, 32]>) -> tensor<f32[1, 8, 30]> {
        conv(x, c1: weights<4 -> 3x3xf32 -> 8>)
    }
}

fn main() {}
