//! A sequence input states its length: the elements are planned at compile time.

kiln::network! {
    net Net(s: seq<tensor<f32[2,3]>>) -> tensor<f32[2,3]> {
        at(s, 0)
    }
}

fn main() {}
