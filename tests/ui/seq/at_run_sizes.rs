//! A split with run-time sizes gives elements whose sizes only the run knows: only `len` reads
//! such a sequence for now.

kiln::network! {
    net Net(x: tensor<f32[6]>, s: tensor<i64[2]>) -> tensor<f32[3]> {
        let q = split_to_seq(x, s);
        at(q, 0)
    }
}

fn main() {}
