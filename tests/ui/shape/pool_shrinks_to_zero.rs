//! The second 2x2 pooling runs on a 1x1 feature map.

kiln::network! {
    net Net(x: fm<3xf32[3,3]>) -> fm<3xf32[1,1]> {
        let h = max_pool(x, 2x2, stride = 2);
        max_pool(h, 2x2, stride = 2)
    }
}

fn main() {}
