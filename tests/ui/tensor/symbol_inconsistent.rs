//! n stands for one size: adding [n,3] and [3,n] fails unless n = 3.

kiln::network! {
    net Net(x: tensor<f32[n,3]>, y: tensor<f32[3,n]>) -> tensor<f32[n,3]> where n in [3, 4] {
        add(x, y)
    }
}

fn main() {}
