//! One mistake in the first layer of a LeNet-like chain: the layers after it, which read its
//! poisoned result, must stay quiet.

kiln::network! {
    net Net(x: fm<1xf32[28,28]>) -> vec<10xf32> {
        let h = conv2d(x, conv1: weights<3 -> 5x5xf32 -> 6>, pad = 2).relu();
        let h = max_pool(h, 2x2, stride = 2);
        let h = conv2d(h, conv2: weights<6 -> 5x5xf32 -> 16>).relu6();
        let h = avg_pool(h, 2x2, stride = 2);
        let h = dense(flatten(h), fc1: weights<400 -> 120>).sigmoid();
        dense(h, fc2: weights<120 -> 10>)
    }
}

fn main() {}
