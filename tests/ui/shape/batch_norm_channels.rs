//! The statistics are declared for 8 channels, the feature map has 16.

kiln::network! {
    net Net(x: fm<16xf32[4,4]>) -> fm<16xf32[4,4]> {
        batch_norm(x, bn: norm<8xf32>)
    }
}

fn main() {}
