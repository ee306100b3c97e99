//! `kiln::profile` (cargo feature `profile`): every op a model runs is timed under the label the
//! compiler wrote, once per run, in the order the ops ran. A test of the facade crate, not of
//! `kiln-tests`: enabling the feature there would time every model of every test.
//!
//! `cargo test --features profile --test profile` (the workspace's `cargo test` skips it).

kiln::network! {
    /// The digits CNN of the README, with its trained weights.
    net Digits(x: fm<1xf32[8,8]>) -> vec<10xf32> {
        weights "../examples/digits/data/digits.safetensors";
        let h = conv2d(x, conv1: weights<1 -> 3x3xf32 -> 16>, pad = same).relu();
        let pooled = max_pool(h, 2x2, stride = 2);
        let h = dense(flatten(pooled), fc1: weights<256 -> 64>).relu();
        softmax(dense(h, fc2: weights<64 -> 10>))
    }
}

#[test]
fn each_op_is_timed_under_its_label() {
    let mut model = Digits::new();
    let x = [0.5f32; 64];
    kiln::profile::take();
    for _ in 0..3 {
        model.run(&x).unwrap();
    }
    let ops = kiln::profile::take();
    let labels: Vec<&str> = ops.iter().map(|o| o.label).collect();
    // The conv (its relu fused), the pool, the two dense layers, the softmax; `flatten` is a
    // view and runs nothing.
    assert_eq!(labels.len(), 5, "{labels:#?}");
    assert!(
        labels[0].contains("conv2d fm<1xf32[8,8]> -> fm<16xf32[8,8]>")
            && labels[0].contains("im2col"),
        "{labels:#?}"
    );
    assert!(
        labels[1].starts_with("pooled: max_pool fm<16xf32[8,8]> -> fm<16xf32[4,4]>"),
        "{labels:#?}"
    );
    assert!(labels[2].contains("dense"), "{labels:#?}");
    assert!(labels[4].contains("softmax"), "{labels:#?}");
    for o in &ops {
        assert_eq!(o.calls, 3, "{}", o.label);
        assert!(o.total > std::time::Duration::ZERO, "{}", o.label);
    }
    assert!(kiln::profile::take().is_empty(), "take clears the table");
}
