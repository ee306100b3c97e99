//! Sequence types are for outputs only (for now).

kiln::network! {
    net Net(s: seq<tensor<f32[2,3]>>) -> tensor<f32[2,3]> {
        at(s, 0)
    }
}

fn main() {}
