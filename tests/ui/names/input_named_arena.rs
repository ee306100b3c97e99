//! `run_in` takes the caller's arena as `arena`, so an input cannot have that name.

kiln::network! {
    net Net(arena: vec<4xf32>) -> vec<4xf32> {
        relu(arena)
    }
}

fn main() {}
