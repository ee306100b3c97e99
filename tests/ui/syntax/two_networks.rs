//! One network per `network!` invocation.

kiln::network! {
    net A(x: vec<4xf32>) -> vec<4xf32> {
        relu(x)
    }
    net B(x: vec<4xf32>) -> vec<4xf32> {
        relu(x)
    }
}

fn main() {}
