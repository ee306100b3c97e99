//! NEON element-wise kernels: activations ([`unary`]) and broadcasting arithmetic
//! ([`binary`]), in and out of place; same contracts as the portable ones.
//!
//! Algorithm sketch. Activations are the shared vector epilogue (`simd::epilogue*`) with scale
//! 1 and shift 0. The broadcasting kernels walk the three outer dimensions of the rank-4 output
//! keeping each operand's base offset, and specialise the innermost row on its strides: both
//! contiguous (vector op on two loads), one side broadcast (vector op against a duplicated
//! scalar), or general strides (scalar). The operator is matched once, outside every loop.
//! `+ - * /` are single correctly rounded IEEE operations in both the vector and scalar units,
//! so the results are bit-identical to the portable kernels.

use super::simd::{epilogue, epilogue_from, load, store, LANES};
use crate::{Activation, BinaryOp, Broadcast};
use core::arch::aarch64::*;

/// `out[i] = act(input[i])` for every `i` in `input`.
pub(crate) fn unary(act: Activation, input: &[f32], out: &mut [f32]) {
    debug_assert!(out.len() >= input.len(), "unary: out too short");
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe { unary_neon(act, input, out) }
}

/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn unary_neon(act: Activation, input: &[f32], out: &mut [f32]) {
    epilogue_from(input, out, 1.0, 0.0, act);
}

/// `data[i] = act(data[i])`.
pub(crate) fn unary_inplace(act: Activation, data: &mut [f32]) {
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe { unary_inplace_neon(act, data) }
}

/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn unary_inplace_neon(act: Activation, data: &mut [f32]) {
    epilogue(data, 1.0, 0.0, act);
}

/// One past the largest element offset `strides` can reach within `shape` (0 if empty).
fn extent(shape: [usize; 4], strides: [usize; 4]) -> usize {
    if shape.contains(&0) {
        return 0;
    }
    1 + (0..4).map(|d| (shape[d] - 1) * strides[d]).sum::<usize>()
}

/// Calls `row(out_offset, a_offset, b_offset)` for each innermost row, in output order.
#[inline(always)]
fn for_each_row(
    shape: [usize; 4],
    sa: [usize; 4],
    sb: [usize; 4],
    mut row: impl FnMut(usize, usize, usize),
) {
    let mut o = 0;
    for i0 in 0..shape[0] {
        for i1 in 0..shape[1] {
            for i2 in 0..shape[2] {
                row(
                    o,
                    i0 * sa[0] + i1 * sa[1] + i2 * sa[2],
                    i0 * sb[0] + i1 * sb[1] + i2 * sb[2],
                );
                o += shape[3];
            }
        }
    }
}

/// `dst[i] = f(x[i], y[i])` for contiguous rows.
#[target_feature(enable = "neon")]
#[inline]
fn zip_rows(
    dst: &mut [f32],
    x: &[f32],
    y: &[f32],
    vf: impl Fn(float32x4_t, float32x4_t) -> float32x4_t,
    sf: impl Fn(f32, f32) -> f32,
) {
    let n = dst.len();
    let (x, y) = (&x[..n], &y[..n]);
    let mut d = dst.chunks_exact_mut(LANES);
    let mut xs = x.chunks_exact(LANES);
    let mut ys = y.chunks_exact(LANES);
    for ((d, x), y) in (&mut d).zip(&mut xs).zip(&mut ys) {
        store(d, vf(load(x), load(y)));
    }
    let tails = xs.remainder().iter().zip(ys.remainder());
    for (d, (&x, &y)) in d.into_remainder().iter_mut().zip(tails) {
        *d = sf(x, y);
    }
}

/// `dst[i] = f(x[i], y)` (`swap`: `f(y, x[i])`) for a contiguous row against a scalar.
#[target_feature(enable = "neon")]
#[inline]
fn scalar_rows(
    dst: &mut [f32],
    x: &[f32],
    y: f32,
    swap: bool,
    vf: impl Fn(float32x4_t, float32x4_t) -> float32x4_t,
    sf: impl Fn(f32, f32) -> f32,
) {
    let n = dst.len();
    let x = &x[..n];
    let vy = vdupq_n_f32(y);
    let mut d = dst.chunks_exact_mut(LANES);
    let mut xs = x.chunks_exact(LANES);
    if swap {
        for (d, x) in (&mut d).zip(&mut xs) {
            store(d, vf(vy, load(x)));
        }
    } else {
        for (d, x) in (&mut d).zip(&mut xs) {
            store(d, vf(load(x), vy));
        }
    }
    for (d, &x) in d.into_remainder().iter_mut().zip(xs.remainder()) {
        *d = if swap { sf(y, x) } else { sf(x, y) };
    }
}

/// `out = f(a, b)` under broadcasting, for one statically known `f`.
#[target_feature(enable = "neon")]
#[inline]
fn binary_with(
    bc: &Broadcast,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    vf: impl Fn(float32x4_t, float32x4_t) -> float32x4_t + Copy,
    sf: impl Fn(f32, f32) -> f32 + Copy,
) {
    let n = bc.shape[3];
    let (sa, sb) = (bc.a_strides[3], bc.b_strides[3]);
    for_each_row(bc.shape, bc.a_strides, bc.b_strides, |o, ia, ib| {
        let dst = &mut out[o..o + n];
        match (sa, sb) {
            (1, 1) => zip_rows(dst, &a[ia..], &b[ib..], vf, sf),
            (1, 0) => scalar_rows(dst, &a[ia..], b[ib], false, vf, sf),
            (0, 1) => scalar_rows(dst, &b[ib..], a[ia], true, vf, sf),
            _ => {
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = sf(a[ia + j * sa], b[ib + j * sb]);
                }
            }
        }
    });
}

/// `acc = f(acc, other)` under broadcasting (`swap`: `f(other, acc)`), `other` indexed by
/// `so`; `acc` is contiguous with `shape`.
#[target_feature(enable = "neon")]
#[inline]
fn inplace_with(
    shape: [usize; 4],
    so: [usize; 4],
    acc: &mut [f32],
    other: &[f32],
    swap: bool,
    vf: impl Fn(float32x4_t, float32x4_t) -> float32x4_t + Copy,
    sf: impl Fn(f32, f32) -> f32 + Copy,
) {
    let n = shape[3];
    let s = so[3];
    // The accumulator's offset is the output offset, so its stride slot is unused (zeros).
    for_each_row(shape, [0; 4], so, |o, _, io| {
        let dst = &mut acc[o..o + n];
        match s {
            1 => {
                let y = &other[io..io + n];
                let mut d = dst.chunks_exact_mut(LANES);
                let mut ys = y.chunks_exact(LANES);
                for (d, y) in (&mut d).zip(&mut ys) {
                    let (x, y) = (load(d), load(y));
                    store(d, if swap { vf(y, x) } else { vf(x, y) });
                }
                for (d, &y) in d.into_remainder().iter_mut().zip(ys.remainder()) {
                    *d = if swap { sf(y, *d) } else { sf(*d, y) };
                }
            }
            0 => {
                let y = other[io];
                let vy = vdupq_n_f32(y);
                let mut d = dst.chunks_exact_mut(LANES);
                for d in &mut d {
                    let x = load(d);
                    store(d, if swap { vf(vy, x) } else { vf(x, vy) });
                }
                for d in d.into_remainder() {
                    *d = if swap { sf(y, *d) } else { sf(*d, y) };
                }
            }
            _ => {
                for (j, d) in dst.iter_mut().enumerate() {
                    let y = other[io + j * s];
                    *d = if swap { sf(y, *d) } else { sf(*d, y) };
                }
            }
        }
    });
}

/// Runs `$call` with `$vf`/`$sf` bound to the vector and scalar forms of `$op`.
macro_rules! with_op {
    ($op:expr, |$vf:ident, $sf:ident| $call:expr) => {
        match $op {
            BinaryOp::Add => {
                let ($vf, $sf) = (|x, y| vaddq_f32(x, y), |x: f32, y: f32| x + y);
                $call
            }
            BinaryOp::Sub => {
                let ($vf, $sf) = (|x, y| vsubq_f32(x, y), |x: f32, y: f32| x - y);
                $call
            }
            BinaryOp::Mul => {
                let ($vf, $sf) = (|x, y| vmulq_f32(x, y), |x: f32, y: f32| x * y);
                $call
            }
            BinaryOp::Div => {
                let ($vf, $sf) = (|x, y| vdivq_f32(x, y), |x: f32, y: f32| x / y);
                $call
            }
        }
    };
}

/// `out = a op b` with broadcasting; see [`Broadcast`].
pub(crate) fn binary(op: BinaryOp, bc: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32]) {
    debug_assert!(
        a.len() >= extent(bc.shape, bc.a_strides),
        "binary: a too short"
    );
    debug_assert!(
        b.len() >= extent(bc.shape, bc.b_strides),
        "binary: b too short"
    );
    debug_assert!(
        out.len() >= bc.shape.iter().product(),
        "binary: out too short"
    );
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe { binary_neon(op, bc, a, b, out) }
}

/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn binary_neon(op: BinaryOp, bc: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32]) {
    if bc.shape.contains(&0) {
        return;
    }
    with_op!(op, |vf, sf| binary_with(bc, a, b, out, vf, sf));
}

/// In place, with `acc` contiguous with `bc.shape` and holding the result.
///
/// With `acc_is_lhs`, `acc = acc op other` and `other` is indexed by `bc.b_strides`;
/// otherwise `acc = other op acc` and `other` is indexed by `bc.a_strides`.
pub(crate) fn binary_inplace(
    op: BinaryOp,
    bc: &Broadcast,
    acc: &mut [f32],
    other: &[f32],
    acc_is_lhs: bool,
) {
    let so = if acc_is_lhs {
        bc.b_strides
    } else {
        bc.a_strides
    };
    debug_assert!(
        acc.len() >= bc.shape.iter().product(),
        "binary_inplace: acc too short"
    );
    debug_assert!(
        other.len() >= extent(bc.shape, so),
        "binary_inplace: other too short"
    );
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe { binary_inplace_neon(op, bc.shape, so, acc, other, !acc_is_lhs) }
}

/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn binary_inplace_neon(
    op: BinaryOp,
    shape: [usize; 4],
    so: [usize; 4],
    acc: &mut [f32],
    other: &[f32],
    swap: bool,
) {
    if shape.contains(&0) {
        return;
    }
    with_op!(op, |vf, sf| inplace_with(
        shape, so, acc, other, swap, vf, sf
    ));
}
