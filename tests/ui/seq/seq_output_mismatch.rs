//! A returned sequence's declared element type must match.

kiln::network! {
    net Net(x: tensor<f32[2,3]>, y: tensor<f32[2,4]>) -> seq<tensor<f32[2,3]>> {
        seq_construct(relu(x), relu(y))
    }
}

fn main() {}
