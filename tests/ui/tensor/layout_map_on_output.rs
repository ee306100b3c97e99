//! Outputs come back in the network's own layout.

kiln::network! {
    net Net(x: fm<3xf32[8,8]>) -> fm<3xf32[8,8], (H,W,C)[N] -> (N,C,H,W)> {
        relu(x)
    }
}

fn main() {}
