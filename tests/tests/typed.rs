//! Networks on the general tensor type (`tensor<...>`, shape-generic ops, several results) against
//! onnxruntime's outputs, made by `scripts/gen_typed_testdata.py` into `data/typed/`.

use kiln::Tensor;
use kiln_tests::{
    assert_close, f32_tensors, tensor_of, Conv1d, Conv3d, DataMove, Shuffle, Transformer,
};

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

#[test]
fn data_movement_on_every_dtype_matches_onnxruntime() {
    const IO: &str = "typed/datamove_io.safetensors";
    let (x, _) = tensor_of::<f32>(IO, "x");
    let (idx, _) = tensor_of::<i64>(IO, "idx");
    let (b, _) = tensor_of::<u8>(IO, "b");
    let (d, _) = tensor_of::<f64>(IO, "d");
    let mut model = DataMove::new();
    let (y0, y1, y2, y3, y4, y5, y6, y7, y8) = model.run(&x, &idx, &b, &d).unwrap();
    let f32s = |got: Tensor<f32>, name: &str| {
        let (want, shape) = tensor_of::<f32>(IO, name);
        assert_eq!(got.shape(), shape.as_slice(), "{name}");
        assert_close(&got, &want);
    };
    let exact = |got: &[u8], shape: &[usize], name: &str| {
        let (want, want_shape) = tensor_of::<u8>(IO, name);
        assert_eq!(shape, want_shape.as_slice(), "{name}");
        assert_eq!(got, want.as_slice(), "{name}");
    };
    let f64s = |got: Tensor<f64>, name: &str| {
        let (want, shape) = tensor_of::<f64>(IO, name);
        assert_eq!(got.shape(), shape.as_slice(), "{name}");
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                "{name}: {g} vs {w}"
            );
        }
        assert_eq!(got.len(), want.len(), "{name}");
    };
    f32s(y0, "y0");
    exact(&y1, y1.shape(), "y1");
    f32s(y2, "y2");
    f64s(y3, "y3");
    f64s(y4, "y4");
    f64s(y5, "y5");
    f32s(y6, "y6");
    exact(&y7, y7.shape(), "y7");
    f64s(y8, "y8");
}

#[test]
fn a_run_time_index_out_of_range_is_an_err() {
    const IO: &str = "typed/datamove_io.safetensors";
    let (x, _) = tensor_of::<f32>(IO, "x");
    let (b, _) = tensor_of::<u8>(IO, "b");
    let (d, _) = tensor_of::<f64>(IO, "d");
    let mut model = DataMove::new();
    for bad in [[0i64, 4, 1], [-5, 0, 0]] {
        let e = model.run(&x, &bad, &b, &d).unwrap_err();
        assert!(
            matches!(
                e,
                kiln::Error::IndexOutOfRange {
                    op: "gather",
                    len: 4,
                    ..
                }
            ),
            "{e}"
        );
    }
    // Negative indices count from the end.
    let (y0, ..) = model.run(&x, &[-1i64, -4, 0], &b, &d).unwrap();
    assert_eq!(&y0[..5], &x[15..20]);
    assert_eq!(&y0[5..10], &x[0..5]);
}

#[test]
fn i64_inputs_can_be_bytes_read_in_place() {
    // `idx` is declared i64: 24 native-endian bytes hold its three values.
    const IO: &str = "typed/datamove_io.safetensors";
    let (x, _) = tensor_of::<f32>(IO, "x");
    let (b, _) = tensor_of::<u8>(IO, "b");
    let (d, _) = tensor_of::<f64>(IO, "d");
    let idx = [2i64, 1, 0];
    let raw: &[u8] = bytemuck::cast_slice(&idx);
    let mut model = DataMove::new();
    let (y0, ..) = model.run(&x, raw, &b, &d).unwrap();
    assert_eq!(&y0[..5], &x[10..15]);
    let e = model.run(&x, &raw[..20], &b, &d).unwrap_err();
    assert!(
        e.to_string().contains("not a whole number of i64 values"),
        "{e}"
    );
}
