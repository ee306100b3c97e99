//! A 2-D pooling window on a volume `[N, C, D, H, W]`: the window needs three sizes (or one).

kiln::network! {
    net Net(x: tensor<f32[1, 4, 2, 8, 8]>) -> tensor<f32[1, 4, 1, 4, 4]> {
        max_pool(x, 2x2, stride = 2)
    }
}

fn main() {}
