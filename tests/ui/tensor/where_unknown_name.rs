//! The where clause names a size no type uses.

kiln::network! {
    net Net(x: tensor<f32[n,3]>) -> tensor<f32[n,3]> where (n, m) in [(1, 2)] {
        relu(x)
    }
}

fn main() {}
