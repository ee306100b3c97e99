//! A sequence input of any length gives `?` for sizes its elements may differ in, not size
//! symbols (those pick a precompiled variant, and one sequence may mix sizes).

kiln::network! {
    net Net(x: tensor<f32[n,3]>, s: seq<tensor<f32[n,3]>>) -> tensor<i64[]> where n in [2, 4] {
        len(s)
    }
}

fn main() {}
