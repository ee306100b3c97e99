//! Sizes that are not fixed when the model is written.
//!
//! * Symbolic sizes and precompiled shape variants (`where (h, w) in [...]`): each variant
//!   against onnxruntime's outputs for that input size
//!   (`data/typed/multishape_io_<h>x<w>.safetensors`), the choice of variant at run time, errors
//!   for shapes the model was not compiled for, and no allocation when switching variants.
//! * Data-dependent sizes (`slice` with run-time bounds, `nonzero`): onnxruntime's outputs at
//!   several run-time sizes (`dynslice_io_<s>_<e>`, `nonzero_io_<n>`), and grow-only buffers: a
//!   run with equal or smaller sizes than an earlier one allocates nothing.
//! * Data movement on i64, f64 and u8 (`data/typed/datamove_io.safetensors`): run-time indices
//!   checked at run time, bytes read in place.
//! * Layout-map inputs.

use kiln::{Error, Tensor};
use kiln_tests::{
    allocations_during, assert_close, f32_tensors, tensor_of, DataMove, DynSlice, MultiShape, Nhwc,
    NonZero,
};

#[global_allocator]
static GLOBAL: kiln_tests::Counting = kiln_tests::Counting;

const SIZES: [(usize, usize); 3] = [(8, 8), (12, 12), (16, 10)];

/// Input and expected output for one size.
fn io(h: usize, w: usize) -> (Vec<f32>, Vec<usize>, Vec<f32>) {
    let t = f32_tensors(&format!("typed/multishape_io_{h}x{w}.safetensors"));
    let (x, shape) = t["x"].clone();
    (x, shape, t["y"].0.clone())
}

fn check_variant(h: usize, w: usize) {
    let (x, shape, want) = io(h, w);
    assert_eq!(shape, [1, 3, h, w]);
    let mut model = MultiShape::new();
    let y = model.run(&Tensor::new(&x, &shape)).unwrap();
    assert_eq!(y.shape(), &[1, 4, 1, 1]);
    assert_close(&y, &want);
}

#[test]
fn variant_8x8_matches_onnxruntime() {
    check_variant(8, 8);
}

#[test]
fn variant_12x12_matches_onnxruntime() {
    check_variant(12, 12);
}

#[test]
fn variant_16x10_matches_onnxruntime() {
    check_variant(16, 10);
}

#[test]
fn one_model_switches_between_variants() {
    let mut model = MultiShape::new();
    for _ in 0..2 {
        for (h, w) in SIZES.into_iter().rev() {
            let (x, shape, want) = io(h, w);
            let y = model.run(&Tensor::new(&x, &shape)).unwrap();
            assert_close(&y, &want);
        }
    }
}

#[test]
fn a_plain_slice_picks_the_variant_by_its_length() {
    let (x, _, want) = io(12, 12);
    let mut model = MultiShape::new();
    assert_close(&model.run(&x).unwrap(), &want);
}

#[test]
fn an_unlisted_shape_is_an_error_listing_the_compiled_shapes() {
    let x = vec![0.0f32; 3 * 9 * 9];
    let mut model = MultiShape::new();
    let e = model.run(&Tensor::new(&x, &[1, 3, 9, 9])).unwrap_err();
    assert!(matches!(e, Error::UnknownShape { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "input `x` has shape [1, 3, 9, 9], but the model was compiled for the shapes \
         [1, 3, 8, 8], [1, 3, 12, 12], [1, 3, 16, 10]"
    );
}

#[test]
fn an_unlisted_length_is_an_error() {
    let x = vec![0.0f32; 100];
    let mut model = MultiShape::new();
    let e = model.run(&x).unwrap_err();
    assert!(e.to_string().contains("has 100 values"), "{e}");
}

#[test]
fn the_shape_must_match_even_when_the_length_does() {
    // 3 * 8 * 8 values, but as [1, 3, 4, 16]: not a compiled shape.
    let x = vec![0.0f32; 192];
    let mut model = MultiShape::new();
    assert!(model.run(&Tensor::new(&x, &[1, 3, 4, 16])).is_err());
}

#[test]
fn arena_constants_cover_every_variant() {
    assert_eq!(
        MultiShape::VARIANTS,
        ["h = 8, w = 8", "h = 12, w = 12", "h = 16, w = 10"]
    );
    assert_eq!(MultiShape::VARIANT_ARENA_BYTES.len(), 3);
    assert_eq!(
        MultiShape::ARENA_BYTES,
        *MultiShape::VARIANT_ARENA_BYTES.iter().max().unwrap()
    );
    // A larger input needs a larger plan.
    assert!(MultiShape::VARIANT_ARENA_BYTES[0] < MultiShape::VARIANT_ARENA_BYTES[2]);
    for label in MultiShape::VARIANTS {
        assert!(
            MultiShape::PLAN.contains(&format!("variant {label}:")),
            "{}",
            MultiShape::PLAN
        );
    }
}

#[test]
fn run_in_needs_only_the_chosen_variants_arena() {
    let model = MultiShape::new();
    let (x, shape, want) = io(8, 8);
    let mut arena = kiln::Arena::new(MultiShape::VARIANT_ARENA_BYTES[0]);
    let y = model
        .run_in(arena.as_bytes_mut(), &Tensor::new(&x, &shape))
        .unwrap();
    assert_close(&y, &want);
    // The same arena is too small for the largest variant, and says so.
    let (x, shape, _) = io(16, 10);
    let e = model
        .run_in(arena.as_bytes_mut(), &Tensor::new(&x, &shape))
        .unwrap_err();
    assert!(matches!(e, Error::ArenaTooSmall { .. }), "{e}");
}

#[test]
fn switching_variants_allocates_nothing() {
    let inputs: Vec<_> = SIZES.iter().map(|&(h, w)| io(h, w)).collect();
    let mut model = MultiShape::new();
    // The counter must see allocations at all, or a zero below would prove nothing.
    assert!(allocations_during(|| drop(std::hint::black_box(vec![1u8; 10]))) > 0);
    let n = allocations_during(|| {
        for _ in 0..3 {
            for (x, shape, _) in &inputs {
                let y = model.run(&Tensor::new(x, shape)).unwrap();
                std::hint::black_box(y.as_slice());
            }
        }
    });
    assert_eq!(n, 0, "switching variants allocated {n} times");
}

#[test]
fn a_layout_map_input_takes_a_channels_last_buffer() {
    let (x, _, want) = io(8, 8);
    // The golden input is NCHW [1, 3, 8, 8]; lay it out as NHWC by hand.
    let mut nhwc = vec![0.0f32; x.len()];
    for c in 0..3 {
        for h in 0..8 {
            for w in 0..8 {
                nhwc[(h * 8 + w) * 3 + c] = x[(c * 8 + h) * 8 + w];
            }
        }
    }
    assert_eq!(Nhwc::INPUT_SHAPES, &[&[1, 8, 8, 3][..]]);
    let mut model = Nhwc::new();
    assert_close(&model.run(&nhwc).unwrap(), &want);
    // The transpose is planned like any op: the plan shows it.
    assert!(Nhwc::PLAN.contains("= transpose"), "{}", Nhwc::PLAN);
}

/// `(s, e)` of each `dynslice_io_<s>_<e>.safetensors`, and the rows it keeps.
const DYN_CASES: [(i64, i64, usize); 4] = [(2, 7, 5), (0, 10, 10), (-3, 100, 3), (5, 5, 0)];

fn dynslice_case(s: i64, e: i64) -> String {
    format!("typed/dynslice_io_{s}_{e}.safetensors")
}

#[test]
fn data_dependent_slice_matches_onnxruntime_at_every_size() {
    let mut model = DynSlice::new();
    for (s, e, rows) in DYN_CASES {
        let io = dynslice_case(s, e);
        let (x, _) = tensor_of::<f32>(&io, "x");
        let (y0, y1) = model.run(&x, &[s], &[e]).unwrap();
        let (want0, shape0) = tensor_of::<f32>(&io, "y0");
        assert_eq!(y0.shape(), shape0.as_slice(), "s = {s}, e = {e}");
        assert_eq!(y0.shape(), &[rows, 4]);
        assert_close(&y0, &want0);
        assert_close(&y1, &tensor_of::<f32>(&io, "y1").0);
    }
}

#[test]
fn data_dependent_buffers_grow_only() {
    let (x, _) = tensor_of::<f32>(&dynslice_case(2, 7), "x");
    let mut model = DynSlice::new();
    // The first run of each size larger than any before may allocate; the counter must see it.
    let first = allocations_during(|| {
        model.run(&x, &[0], &[10]).unwrap();
    });
    assert!(first > 0, "the first run sizes the buffers");
    // Equal and smaller sizes reuse them.
    let again = allocations_during(|| {
        for (s, e) in [(0, 10), (2, 7), (5, 5), (-3, 100), (0, 10)] {
            let (y0, y1) = model.run(&x, &[s], &[e]).unwrap();
            std::hint::black_box((y0.as_slice(), y1.as_slice()));
        }
    });
    assert_eq!(
        again, 0,
        "runs with equal or smaller sizes allocated {again} times"
    );
}

#[test]
fn nonzero_matches_onnxruntime_at_every_count() {
    let mut model = NonZero::new();
    for n in [3usize, 6, 0] {
        let io = format!("typed/nonzero_io_{n}.safetensors");
        let (x, _) = tensor_of::<f32>(&io, "x");
        let (want, shape) = tensor_of::<f32>(&io, "y");
        let y = model.run(&x).unwrap();
        assert_eq!(y.shape(), shape.as_slice(), "n = {n}");
        assert_eq!(y.shape(), &[n]);
        assert_close(&y, &want);
    }
}

#[test]
fn data_dependent_models_print_their_run_time_sizes() {
    // Data-dependent values are not in the planned arena: the plan lists only the static part.
    assert!(!DynSlice::PLAN.contains("= slice"), "{}", DynSlice::PLAN);
    assert!(
        DynSlice::PLAN.contains("= reduce_sum"),
        "{}",
        DynSlice::PLAN
    );
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

kiln::network! {
    /// Concat and split of u8 channels (the data-movement kernels are generic over the dtype).
    net BytePlanes(a: tensor<u8[1, 2, 3, 3]>, b: tensor<u8[1, 1, 3, 3]>) -> (tensor<u8[1, 1, 3, 3]>, tensor<u8[1, 2, 3, 3]>) {
        let (p, q) = split(concat(a, b), axis = 1, sizes = [1, 2]);
        (p, q)
    }
}

#[test]
fn concat_and_split_move_bytes() {
    let a: Vec<u8> = (0..18).collect();
    let b: Vec<u8> = (100..109).collect();
    let mut model = BytePlanes::new();
    let (p, q) = model.run(&a, &b).unwrap();
    // concat on channels gives planes a0, a1, b; split takes a0, then (a1, b).
    assert_eq!(p.as_slice(), &a[..9]);
    assert_eq!(&q[..9], &a[9..]);
    assert_eq!(&q[9..], b.as_slice());
}

kiln::network! {
    /// `range` with run-time bounds: a size with no compile-time bound at all.
    net Ramp(start: tensor<i64[]>, limit: tensor<i64[]>, delta: tensor<i64[]>) -> tensor<f32[?]> {
        mul(cast(range(start, limit, delta), f32), 0.5)
    }
}

#[test]
fn range_counts_at_run_time() {
    let mut model = Ramp::new();
    for (s, l, d) in [(0i64, 10i64, 3i64), (10, -5, -4), (3, 3, 1), (-2, 2, 1)] {
        // The reference: ONNX Range, element by element.
        let mut want = Vec::new();
        let mut v = s;
        while (d > 0 && v < l) || (d < 0 && v > l) {
            want.push(v as f32 * 0.5);
            v += d;
        }
        let y = model.run(&[s], &[l], &[d]).unwrap();
        assert_eq!(y.shape(), &[want.len()], "range({s}, {l}, {d})");
        assert_eq!(y.as_slice(), want.as_slice(), "range({s}, {l}, {d})");
    }
    let e = model.run(&[0i64], &[5i64], &[0i64]).unwrap_err();
    assert!(matches!(e, Error::RangeStep), "{e}");
}

kiln::network! {
    /// `split` with sizes given at run time: as many parts as the `let` binds.
    net Parts(x: tensor<f32[6, 2]>, s: tensor<i64[2]>) -> (tensor<f32[?, 2]>, tensor<f32[?, 2]>) {
        let (a, b) = split(x, axis = 0, sizes = s);
        (a, neg(b))
    }
}

#[test]
fn split_with_run_time_sizes() {
    let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let mut model = Parts::new();
    for cut in [2usize, 0, 6] {
        let (a, b) = model.run(&x, &[cut as i64, 6 - cut as i64]).unwrap();
        assert_eq!(a.shape(), &[cut, 2]);
        assert_eq!(b.shape(), &[6 - cut, 2]);
        assert_eq!(a.as_slice(), &x[..2 * cut]);
        let neg: Vec<f32> = x[2 * cut..].iter().map(|v| -v).collect();
        assert_eq!(b.as_slice(), neg.as_slice());
    }
    for bad in [[3i64, 4], [-1, 7]] {
        let e = model.run(&x, &bad).unwrap_err();
        assert!(matches!(e, Error::SplitSizes { dim: 6, .. }), "{e}");
    }
}
