//! The caller's layout must name N, C, H and W once each.

kiln::network! {
    net Net(x: fm<3xf32[8,8], (H,H,C)[N] -> (N,C,H,W)>) -> fm<3xf32[8,8]> {
        relu(x)
    }
}

fn main() {}
