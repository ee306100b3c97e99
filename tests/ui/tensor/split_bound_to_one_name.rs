//! split gives several values; binding them to one name is an error.

kiln::network! {
    net Net(x: tensor<f32[2,6]>) -> tensor<f32[2,3]> {
        let a = split(x, axis = 1, sizes = [3, 3]); a
    }
}

fn main() {}
