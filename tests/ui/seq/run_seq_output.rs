//! A sequence whose length is decided at run time cannot be returned (yet): a returned
//! sequence is a `kiln::Seq` of a length known at compile time.

kiln::network! {
    net Net(s: seq<tensor<f32[?,3]>>) -> seq<tensor<f32[?,3]>> {
        erase(s)
    }
}

fn main() {}
