//! Batch norm divides by `sqrt(var + eps)`: `eps` must be positive.

kiln::network! {
    net Net(x: fm<4xf32[8,8]>) -> fm<4xf32[8,8]> {
        batch_norm(x, bn: norm<4xf32>, eps = -1e-5)
    }
}

fn main() {}
