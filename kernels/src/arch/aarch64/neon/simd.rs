//! NEON building blocks shared by this folder's kernels: bounds-checked vector loads and
//! stores, and the vector form of the shared epilogue `y = act(x * scale + shift)`.
//!
//! Everything here is a *safe* `#[target_feature(enable = "neon")]` function: the compiler only
//! lets code that itself has NEON enabled call them without `unsafe`, and the only such code is
//! this folder's `unsafe` entry points, which the table reaches after detecting NEON. Loads and
//! stores take slices and check their length (a short slice panics, exactly like the portable
//! kernels' indexing), so the one raw-pointer operation per helper is justified locally.
//!
//! The epilogue reproduces the portable one bit for bit: `x * scale + shift` is a separate
//! multiply and add (Rust never contracts them into an FMA), and each activation is written as
//! the same comparisons as [`Activation::apply`] (compare-and-select, not `fmax`, so NaN and
//! `-0.0` come out the same). Sigmoid and tanh have no cheap vector form with the reference's
//! accuracy, so they run the scalar reference on every element.

use crate::Activation;
use core::arch::aarch64::*;

/// `f32` lanes in a NEON register.
pub(super) const LANES: usize = 4;

/// The first four elements of `s` as a vector. Panics if `s` is shorter.
#[target_feature(enable = "neon")]
#[inline]
pub(super) fn load(s: &[f32]) -> float32x4_t {
    let s: &[f32; LANES] = s.first_chunk().expect("neon load: fewer than 4 elements");
    // SAFETY: `s` is a reference to four initialised f32s; `vld1q_f32` needs no alignment
    // beyond `f32`'s.
    unsafe { vld1q_f32(s.as_ptr()) }
}

/// Stores `v` into the first four elements of `d`. Panics if `d` is shorter.
#[target_feature(enable = "neon")]
#[inline]
pub(super) fn store(d: &mut [f32], v: float32x4_t) {
    let d: &mut [f32; LANES] = d
        .first_chunk_mut()
        .expect("neon store: fewer than 4 elements");
    // SAFETY: `d` is a unique reference to four f32s; `vst1q_f32` needs no alignment beyond
    // `f32`'s.
    unsafe { vst1q_f32(d.as_mut_ptr(), v) }
}

/// The even-indexed elements `s[0], s[2], s[4], s[6]` (a stride-2 gather in one `ld2`).
/// Panics if `s` has fewer than eight elements.
#[target_feature(enable = "neon")]
#[inline]
pub(super) fn load_even(s: &[f32]) -> float32x4_t {
    let s: &[f32; 2 * LANES] = s
        .first_chunk()
        .expect("neon load_even: fewer than 8 elements");
    // SAFETY: `s` is a reference to eight initialised f32s, all that `vld2q_f32` reads.
    unsafe { vld2q_f32(s.as_ptr()) }.0
}

/// `x < 0 ? 0 : x`, as [`Activation::Relu`] (NaN and `-0.0` pass through).
#[target_feature(enable = "neon")]
#[inline]
fn relu(x: float32x4_t) -> float32x4_t {
    let zero = vdupq_n_f32(0.0);
    vbslq_f32(vcltq_f32(x, zero), zero, x)
}

/// [`Activation::Clip`]: the lower bound wins when both apply, as in the scalar definition.
#[target_feature(enable = "neon")]
#[inline]
fn clip(x: float32x4_t, min: float32x4_t, max: float32x4_t) -> float32x4_t {
    let upper = vbslq_f32(vcgtq_f32(x, max), max, x);
    vbslq_f32(vcltq_f32(x, min), min, upper)
}

/// [`Activation::LeakyRelu`].
#[target_feature(enable = "neon")]
#[inline]
fn leaky(x: float32x4_t, alpha: float32x4_t) -> float32x4_t {
    vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.0)), vmulq_f32(x, alpha), x)
}

/// `f` applied to each lane of `x` separately.
#[target_feature(enable = "neon")]
#[inline]
fn per_lane(x: float32x4_t, f: impl Fn(f32) -> f32) -> float32x4_t {
    let mut lanes = [0.0f32; LANES];
    store(&mut lanes, x);
    for v in &mut lanes {
        *v = f(*v);
    }
    load(&lanes)
}

/// `dst[i] = f(src[i])` four lanes at a time, `tail` for the last `len % 4`.
#[target_feature(enable = "neon")]
#[inline]
fn map_from(
    src: &[f32],
    dst: &mut [f32],
    f: impl Fn(float32x4_t) -> float32x4_t,
    tail: impl Fn(f32) -> f32,
) {
    let dst = &mut dst[..src.len()];
    let mut s = src.chunks_exact(LANES);
    let mut d = dst.chunks_exact_mut(LANES);
    for (s, d) in (&mut s).zip(&mut d) {
        store(d, f(load(s)));
    }
    for (&x, y) in s.remainder().iter().zip(d.into_remainder()) {
        *y = tail(x);
    }
}

/// In place: `data[i] = f(data[i])`.
#[target_feature(enable = "neon")]
#[inline]
fn map_inplace(
    data: &mut [f32],
    f: impl Fn(float32x4_t) -> float32x4_t,
    tail: impl Fn(f32) -> f32,
) {
    let mut d = data.chunks_exact_mut(LANES);
    for d in &mut d {
        store(d, f(load(d)));
    }
    for y in d.into_remainder() {
        *y = tail(*y);
    }
}

/// Runs `$map(.., vector fn, scalar fn)` with the vector and scalar forms of
/// `act(x * scale + shift)`, the activation matched once, outside the loop.
macro_rules! with_epilogue {
    ($act:expr, $scale:expr, $shift:expr, |$f:ident, $t:ident| $call:expr) => {{
        let (scale, shift, act) = ($scale, $shift, $act);
        let (vs, vh) = (vdupq_n_f32(scale), vdupq_n_f32(shift));
        let affine = |x: float32x4_t| vaddq_f32(vmulq_f32(x, vs), vh);
        let $t = |x: f32| act.apply(x * scale + shift);
        match act {
            Activation::None => {
                let $f = affine;
                $call
            }
            Activation::Relu => {
                let $f = |x| relu(affine(x));
                $call
            }
            Activation::Clip { min, max } => {
                let (lo, hi) = (vdupq_n_f32(min), vdupq_n_f32(max));
                let $f = |x| clip(affine(x), lo, hi);
                $call
            }
            Activation::LeakyRelu { alpha } => {
                let alpha = vdupq_n_f32(alpha);
                let $f = |x| leaky(affine(x), alpha);
                $call
            }
            // No vector form: every lane through the scalar reference.
            Activation::Sigmoid | Activation::Tanh => {
                let $f = |x| per_lane(x, $t);
                $call
            }
        }
    }};
}

/// In place: `data[i] = act(data[i] * scale + shift)`, bit-identical to the portable epilogue.
#[target_feature(enable = "neon")]
#[inline]
pub(super) fn epilogue(data: &mut [f32], scale: f32, shift: f32, act: Activation) {
    // The common "no bias, no activation" case costs nothing, as in the portable version.
    if scale == 1.0 && shift == 0.0 && act == Activation::None {
        return;
    }
    with_epilogue!(act, scale, shift, |f, t| map_inplace(data, f, t));
}

/// Out of place: `dst[i] = act(src[i] * scale + shift)` for `i < src.len()`.
#[target_feature(enable = "neon")]
#[inline]
pub(super) fn epilogue_from(src: &[f32], dst: &mut [f32], scale: f32, shift: f32, act: Activation) {
    with_epilogue!(act, scale, shift, |f, t| map_from(src, dst, f, t));
}
