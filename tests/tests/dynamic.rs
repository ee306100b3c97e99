//! Symbolic sizes and precompiled shape variants (`where (h, w) in [...]`): each variant against
//! onnxruntime's outputs for that input size (`data/typed/multishape_io_<h>x<w>.safetensors`),
//! the choice of variant at run time, errors for shapes the model was not compiled for, and no
//! allocation when switching variants.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use kiln::{Error, Tensor};
use kiln_tests::{assert_close, f32_tensors, MultiShape, Nhwc};

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
