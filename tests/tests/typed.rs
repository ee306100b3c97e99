//! Networks on the general tensor type (`tensor<...>`, shape-generic ops, several results) against
//! onnxruntime's outputs, made by `scripts/gen_typed_testdata.py` into `data/typed/`.

use kiln_tests::{assert_close, f32_tensors, Shuffle, Transformer};

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
