//! A returned run-time sequence has the element type it computes: `erase` keeps `s`'s
//! `tensor<f32[?,3]>`, whose first size is not known to be 2.

kiln::network! {
    net Net(s: seq<tensor<f32[?,3]>>) -> seq<tensor<f32[2,3]>> {
        erase(s)
    }
}

fn main() {}
