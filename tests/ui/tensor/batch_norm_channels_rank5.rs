//! The statistics of a batch norm on a volume `[N, C, D, H, W]` have one entry per channel.

kiln::network! {
    net Net(x: tensor<f32[1, 4, 2, 8, 8]>) -> tensor<f32[1, 4, 2, 8, 8]> {
        batch_norm(x, bn1: norm<8xf32>)
    }
}

fn main() {}
