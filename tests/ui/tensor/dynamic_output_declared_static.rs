//! The output's size is only known at run time: declare it `?`.

kiln::network! {
    net Net(x: tensor<f32[12]>) -> tensor<i64[1,12]> {
        nonzero(x)
    }
}

fn main() {}
