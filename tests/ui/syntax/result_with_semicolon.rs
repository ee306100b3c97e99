//! The result expression comes last and has no `;`.

kiln::network! {
    net Net(x: vec<4xf32>) -> vec<4xf32> {
        let h = relu(x);
    }
}

fn main() {}
