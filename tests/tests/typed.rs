//! Networks on the general tensor type (`tensor<...>`, shape-generic ops, several results) against
//! onnxruntime's outputs, made by `scripts/gen_typed_testdata.py` into `data/typed/`.

use kiln_tests::{assert_close, f32_tensors, Conv1d, Conv3d, Deconv, Shuffle, Transformer};

#[test]
fn transformer_block_matches_onnxruntime() {
    let io = f32_tensors("typed/transformer_io.safetensors");
    let mut model = Transformer::new();
    let (y0, y1, y2) = model.run(&io["x"].0).unwrap();
    for (name, got) in [("y0", y0), ("y1", y1), ("y2", y2)] {
        let (want, shape) = &io[name];
        assert_eq!(got.shape(), shape.as_slice(), "{name}: shape");
        assert_close(&got, want);
    }
}

#[test]
fn conv1d_net_matches_onnxruntime() {
    let io = f32_tensors("typed/conv1d_io.safetensors");
    let mut model = Conv1d::new();
    let y = model.run(&io["x"].0).unwrap();
    let (want, shape) = &io["y"];
    assert_eq!(y.shape(), shape.as_slice());
    assert_close(&y, want);
}

#[test]
fn conv3d_net_matches_onnxruntime() {
    let io = f32_tensors("typed/conv3d_io.safetensors");
    let mut model = Conv3d::new();
    let y = model.run(&io["x"].0).unwrap();
    let (want, shape) = &io["y"];
    assert_eq!(y.shape(), shape.as_slice());
    assert_close(&y, want);
}

#[test]
fn conv_transpose_and_dilated_pools_match_onnxruntime() {
    let io = f32_tensors("typed/deconv_io.safetensors");
    let mut model = Deconv::new();
    let (y0, y1) = model.run(&io["a"].0, &io["b"].0).unwrap();
    for (name, got) in [("y0", y0), ("y1", y1)] {
        let (want, shape) = &io[name];
        assert_eq!(got.shape(), shape.as_slice(), "{name}: shape");
        assert_close(&got, want);
    }
}

/// The batch norms fold into the 1-D and 3-D convolutions (and the relus into their
/// epilogues): the plans hold no batch norm and no activation.
#[test]
fn nd_batch_norms_fold_into_convs() {
    for plan in [Conv1d::PLAN, Conv3d::PLAN] {
        assert!(!plan.contains("batch_norm"), "{plan}");
        assert!(!plan.contains("activation"), "{plan}");
        assert!(plan.contains("conv"), "{plan}");
    }
}

#[test]
fn shufflenet_unit_matches_onnxruntime() {
    let io = f32_tensors("typed/shuffle_io.safetensors");
    let mut model = Shuffle::new();
    let y = model.run(&io["x"].0).unwrap();
    let (want, shape) = &io["y"];
    assert_eq!(y.shape(), shape.as_slice());
    assert_close(&y, want);
}

/// The channel shuffle's two reshapes are free: the plan shows both as aliases, and only the
/// transpose between them moves bytes.
#[test]
fn shuffle_reshapes_are_aliases() {
    let aliases = Shuffle::PLAN
        .lines()
        .filter(|l| l.contains("= reshape") && l.contains("alias of"))
        .count();
    assert_eq!(aliases, 2, "{}", Shuffle::PLAN);
}
