//! Sizes that are not fixed when the model is written.
//!
//! * Symbolic sizes and precompiled shape variants (`where (h, w) in [...]`): each variant
//!   against onnxruntime's outputs for that input size
//!   (`data/typed/multishape_io_<h>x<w>.safetensors`), the choice of variant at run time, errors
//!   for shapes the model was not compiled for, and no allocation when switching variants.
//! * Data-dependent sizes (`slice` with run-time bounds, `nonzero`): onnxruntime's outputs at
//!   several run-time sizes (`dynslice_io_<s>_<e>`, `nonzero_io_<n>`), and grow-only buffers: a
//!   run with equal or smaller sizes than an earlier one allocates nothing.
//! * Layout-map inputs.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kiln::{Error, Tensor};
use kiln_tests::{assert_close, f32_tensors, tensor_of, DynSlice, MultiShape, Nhwc, NonZero};

thread_local! {
    /// Allocations made by this thread (tests run on threads of their own, so counts do not mix).
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: forwards every call to the system allocator unchanged; only counts them.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which we pass on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above, for `dealloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|c| c.set(c.get() + 1));
        // SAFETY: as above, for `realloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

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
