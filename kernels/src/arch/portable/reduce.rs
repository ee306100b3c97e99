//! Reductions and shape-generic element-wise kernels: [`reduce`] (sum, mean, max, min, product
//! over an axis, any numeric dtype), [`unary_math`] (the `f32` math ops that are not fused
//! activations), and the rank-N broadcasting [`binary_nd`], [`compare_nd`] and [`where_nd`].
//!
//! Algorithm sketch.
//!
//! * **Reduce** views `x` as `[outer, len, inner]` (the compiler merges adjacent reduced axes
//!   into one `len` and reduces non-adjacent ones in steps). With `inner == 1` each reduction
//!   is a contiguous row folded with eight independent accumulators (vectorisable, and eight
//!   shorter chains). With `inner > 1` the `inner` reductions of an outer block are
//!   interleaved: they are done `TILE` columns at a time, accumulating whole contiguous row
//!   segments into a stack array, so `x` is read once, in order, never with stride `inner`.
//!   Sums, means and products of floats accumulate in `f64` (see `crate::dtype`): a million
//!   `f32` terms then lose nothing visible in the `f32` result, with no pairwise tree.
//!   Max and min propagate NaN.
//! * **Unary math** matches the operation once, outside the loop, and evaluates the accurate
//!   `no_std` scalar functions of [`crate::math`] (reference versions; SIMD ones would be
//!   tested against these).
//! * **Broadcasting binaries** simplify the rank-N index space first (`nd::Layout`: unit axes
//!   dropped, axes every operand walks as one merged, so e.g. a per-channel bias over NCHW is
//!   two levels, not four), then run the innermost axis as a tight loop specialised on its
//!   strides: both contiguous, one broadcast scalar, or general.

use super::nd::{at, contiguous, Layout};
use crate::dtype::{Element, Num};
use crate::math::{
    erf_f64, erfc_pos_f64, erff, exp_f64_clamped, expf, expm1_neg_f64, ln1p_f64, logf, sqrtf,
};
use crate::{BinaryNd, BinaryOp, CompareOp, Reduce, UnaryMath, WhereNd};

/// Columns per tile for `inner > 1` (a stack array of this many accumulators).
const TILE: usize = 64;

/// Accumulator lanes for contiguous rows.
const LANES: usize = 8;

/// Folds each reduction with `op` from `init`, then writes `finish(acc)`.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // Internal: the kernel's geometry plus the fold.
fn fold<A: Copy, T: Copy, O: Copy>(
    outer: usize,
    len: usize,
    inner: usize,
    x: &[T],
    y: &mut [O],
    init: A,
    step: impl Fn(A, T) -> A,
    merge: impl Fn(A, A) -> A,
    finish: impl Fn(A) -> O,
) {
    let block = len * inner;
    if inner == 1 {
        for (o, d) in y[..outer].iter_mut().enumerate() {
            let row = &x[o * len..(o + 1) * len];
            let mut acc = [init; LANES];
            let chunks = row.chunks_exact(LANES);
            let mut tail = init;
            for &v in chunks.remainder() {
                tail = step(tail, v);
            }
            for c in chunks {
                for (a, &v) in acc.iter_mut().zip(c) {
                    *a = step(*a, v);
                }
            }
            let left = merge(merge(acc[0], acc[4]), merge(acc[1], acc[5]));
            let right = merge(merge(acc[2], acc[6]), merge(acc[3], acc[7]));
            *d = finish(merge(merge(left, right), tail));
        }
        return;
    }
    for o in 0..outer {
        let src = &x[o * block..(o + 1) * block];
        let dst = &mut y[o * inner..(o + 1) * inner];
        let mut t0 = 0;
        while t0 < inner {
            let t1 = (t0 + TILE).min(inner);
            let mut acc = [init; TILE];
            let acc = &mut acc[..t1 - t0];
            for l in 0..len {
                for (a, &v) in acc.iter_mut().zip(&src[l * inner + t0..l * inner + t1]) {
                    *a = step(*a, v);
                }
            }
            for (d, &a) in dst[t0..t1].iter_mut().zip(acc.iter()) {
                *d = finish(a);
            }
            t0 = t1;
        }
    }
}

/// `max` that propagates NaN: once the running value is NaN it stays NaN.
#[inline(always)]
fn max_nan<T: Num>(m: T, v: T) -> T {
    if v > m || v.is_nan() {
        v
    } else {
        m
    }
}

/// `min` that propagates NaN.
#[inline(always)]
fn min_nan<T: Num>(m: T, v: T) -> T {
    if v < m || v.is_nan() {
        v
    } else {
        m
    }
}

/// ONNX `ReduceSum` / `ReduceMean` / `ReduceMax` / `ReduceMin` / `ReduceProd`: `x` viewed as
/// `[outer, len, inner]` is reduced over the middle axis into `y` viewed as `[outer, inner]`.
/// See [`Reduce`] for the empty-axis values; float sums and products accumulate in `f64`,
/// integer ones wrap.
pub fn reduce<T: Num>(kind: Reduce, outer: usize, len: usize, inner: usize, x: &[T], y: &mut [T]) {
    debug_assert!(x.len() >= outer * len * inner, "reduce: x too short");
    debug_assert!(y.len() >= outer * inner, "reduce: y too short");
    if outer * inner == 0 {
        return;
    }
    let add = |a: T::Acc, v: T| T::acc_add(a, v.widen());
    let mul = |a: T::Acc, v: T| T::acc_mul(a, v.widen());
    match kind {
        Reduce::Sum => fold(
            outer,
            len,
            inner,
            x,
            y,
            T::ACC_ZERO,
            add,
            T::acc_add,
            T::narrow,
        ),
        Reduce::Mean => fold(outer, len, inner, x, y, T::ACC_ZERO, add, T::acc_add, |s| {
            T::mean(s, len)
        }),
        Reduce::Prod => fold(
            outer,
            len,
            inner,
            x,
            y,
            T::ACC_ONE,
            mul,
            T::acc_mul,
            T::narrow,
        ),
        Reduce::Max => fold(outer, len, inner, x, y, T::LOWEST, max_nan, max_nan, |m| m),
        Reduce::Min => fold(outer, len, inner, x, y, T::HIGHEST, min_nan, min_nan, |m| m),
    }
}

/// `√(2/π)`, for the tanh form of GELU.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// One [`UnaryMath`] value; the single definition the kernels and tests share.
#[inline(always)]
fn math_one(op: UnaryMath, x: f32) -> f32 {
    match op {
        UnaryMath::Sqrt => sqrtf(x),
        UnaryMath::Exp => expf(x),
        UnaryMath::Log => logf(x),
        UnaryMath::Neg => -x,
        UnaryMath::Abs => x.abs(),
        UnaryMath::Reciprocal => 1.0 / x,
        UnaryMath::Erf => erff(x),
        UnaryMath::Softplus => {
            if x.is_nan() {
                return x;
            }
            // ln(1 + e^x) = max(x, 0) + ln(1 + e^-|x|): never overflows, and ln1p keeps the
            // tiny values of a very negative x.
            let t = f64::from(x);
            (t.max(0.0) + ln1p_f64(exp_f64_clamped(-t.abs()))) as f32
        }
        UnaryMath::Softsign => x / (1.0 + x.abs()),
        UnaryMath::Elu { alpha } => {
            if x > 0.0 || x.is_nan() {
                x
            } else {
                (f64::from(alpha) * expm1_neg_f64(f64::from(x))) as f32
            }
        }
        UnaryMath::Selu { alpha, gamma } => {
            let g = f64::from(gamma);
            if x > 0.0 || x.is_nan() {
                (g * f64::from(x)) as f32
            } else {
                (g * f64::from(alpha) * expm1_neg_f64(f64::from(x))) as f32
            }
        }
        UnaryMath::Gelu => {
            if x.is_nan() {
                return x;
            }
            // x Φ(x) with Φ(x) = erfc(-x/√2) / 2, so a very negative x keeps its tiny
            // relative accuracy instead of cancelling in 1 + erf.
            let t = f64::from(x);
            let u = t * core::f64::consts::FRAC_1_SQRT_2;
            let phi = if u >= 0.0 {
                0.5 * (1.0 + erf_f64(u))
            } else {
                0.5 * erfc_pos_f64(-u)
            };
            (t * phi) as f32
        }
        UnaryMath::GeluTanh => {
            if x.is_nan() {
                return x;
            }
            // (1 + tanh(u)) / 2 = 1 / (1 + e^-2u), which does not cancel for negative u.
            let t = f64::from(x);
            let u = SQRT_2_OVER_PI * (t + 0.044715 * t * t * t);
            (t / (1.0 + exp_f64_clamped(-2.0 * u))) as f32
        }
    }
}

/// Runs `$body` with `$o` bound to `$op` rebuilt with a statically known variant, so that the
/// per-element `match` in [`math_one`] folds away after inlining.
macro_rules! specialise_math {
    ($op:expr, $o:ident => $body:expr) => {
        match $op {
            UnaryMath::Sqrt => {
                let $o = UnaryMath::Sqrt;
                $body
            }
            UnaryMath::Exp => {
                let $o = UnaryMath::Exp;
                $body
            }
            UnaryMath::Log => {
                let $o = UnaryMath::Log;
                $body
            }
            UnaryMath::Neg => {
                let $o = UnaryMath::Neg;
                $body
            }
            UnaryMath::Abs => {
                let $o = UnaryMath::Abs;
                $body
            }
            UnaryMath::Reciprocal => {
                let $o = UnaryMath::Reciprocal;
                $body
            }
            UnaryMath::Erf => {
                let $o = UnaryMath::Erf;
                $body
            }
            UnaryMath::Softplus => {
                let $o = UnaryMath::Softplus;
                $body
            }
            UnaryMath::Softsign => {
                let $o = UnaryMath::Softsign;
                $body
            }
            UnaryMath::Elu { alpha } => {
                let $o = UnaryMath::Elu { alpha };
                $body
            }
            UnaryMath::Selu { alpha, gamma } => {
                let $o = UnaryMath::Selu { alpha, gamma };
                $body
            }
            UnaryMath::Gelu => {
                let $o = UnaryMath::Gelu;
                $body
            }
            UnaryMath::GeluTanh => {
                let $o = UnaryMath::GeluTanh;
                $body
            }
        }
    };
}

/// `y[i] = op(x[i])` for every `i` in `x`; see [`UnaryMath`].
pub fn unary_math(op: UnaryMath, x: &[f32], y: &mut [f32]) {
    debug_assert!(y.len() >= x.len(), "unary_math: y too short");
    specialise_math!(op, o => {
        for (d, &v) in y.iter_mut().zip(x) {
            *d = math_one(o, v);
        }
    });
}

/// In-place [`unary_math`].
pub fn unary_math_inplace(op: UnaryMath, data: &mut [f32]) {
    specialise_math!(op, o => {
        for v in data.iter_mut() {
            *v = math_one(o, *v);
        }
    });
}

/// Checks a broadcast geometry: equal lengths, and (debug) operands long enough.
fn check_nd(what: &str, out: &[usize], strides: &[(&[usize], usize)]) {
    for &(s, len) in strides {
        assert!(
            s.len() == out.len(),
            "{what}: {} strides for rank {}",
            s.len(),
            out.len()
        );
        debug_assert!(
            out.contains(&0)
                || len
                    > out
                        .iter()
                        .zip(s)
                        .map(|(&d, &st)| (d - 1) * st)
                        .sum::<usize>(),
            "{what}: operand too short"
        );
    }
}

/// `y = f(a, b)` under rank-N broadcasting (`y` contiguous with `out`).
#[inline(always)]
fn zip_nd<A: Copy, B: Copy, O: Copy>(
    out: &[usize],
    sa: &[usize],
    sb: &[usize],
    a: &[A],
    b: &[B],
    y: &mut [O],
    f: impl Fn(A, B) -> O,
) {
    let so = contiguous(out);
    let mut l = Layout::<3>::new(out, |s, ax| match s {
        0 => so[ax],
        1 => sa[ax] as isize,
        _ => sb[ax] as isize,
    });
    let total = l.total();
    debug_assert!(y.len() >= total, "binary: y too short");
    if total == 0 {
        return;
    }
    l.simplify();
    let r = l.rank;
    let n = l.dims[r - 1];
    let (ia, ib) = (l.strides[1][r - 1], l.strides[2][r - 1]);
    l.for_each_outer(r - 1, [0; 3], |[o, oa, ob]| {
        let dst = &mut y[at(o)..at(o) + n];
        let (oa, ob) = (at(oa), at(ob));
        match (ia, ib) {
            (1, 1) => {
                for ((d, &u), &v) in dst.iter_mut().zip(&a[oa..oa + n]).zip(&b[ob..ob + n]) {
                    *d = f(u, v);
                }
            }
            (1, 0) => {
                let v = b[ob];
                for (d, &u) in dst.iter_mut().zip(&a[oa..oa + n]) {
                    *d = f(u, v);
                }
            }
            (0, 1) => {
                let u = a[oa];
                for (d, &v) in dst.iter_mut().zip(&b[ob..ob + n]) {
                    *d = f(u, v);
                }
            }
            _ => {
                for (j, d) in dst.iter_mut().enumerate() {
                    *d = f(a[oa + j * ia as usize], b[ob + j * ib as usize]);
                }
            }
        }
    });
}

/// `y = a op b` under rank-N broadcasting (see [`BinaryNd`]), for any numeric dtype. Integer
/// arithmetic wraps and integer division truncates, with `x / 0 = 0` (never a trap).
pub fn binary_nd<T: Num>(op: BinaryOp, p: &BinaryNd, a: &[T], b: &[T], y: &mut [T]) {
    check_nd(
        "binary_nd",
        p.out,
        &[(p.a_strides, a.len()), (p.b_strides, b.len())],
    );
    let (o, sa, sb) = (p.out, p.a_strides, p.b_strides);
    match op {
        BinaryOp::Add => zip_nd(o, sa, sb, a, b, y, |u: T, v| u.add(v)),
        BinaryOp::Sub => zip_nd(o, sa, sb, a, b, y, |u: T, v| u.sub(v)),
        BinaryOp::Mul => zip_nd(o, sa, sb, a, b, y, |u: T, v| u.mul(v)),
        BinaryOp::Div => zip_nd(o, sa, sb, a, b, y, |u: T, v| u.div(v)),
    }
}

/// `y = a^b` under rank-N broadcasting (see [`BinaryNd`]), `f32` ([`powf`](crate::math::powf)).
pub fn pow_nd(p: &BinaryNd, a: &[f32], b: &[f32], y: &mut [f32]) {
    check_nd(
        "pow_nd",
        p.out,
        &[(p.a_strides, a.len()), (p.b_strides, b.len())],
    );
    zip_nd(p.out, p.a_strides, p.b_strides, a, b, y, crate::math::powf);
}

/// `y = (a op b) as u8` under rank-N broadcasting (see [`BinaryNd`] and [`CompareOp`]), for
/// any element type (`bool` operands compare as their 0/1 bytes).
pub fn compare_nd<T: Element>(op: CompareOp, p: &BinaryNd, a: &[T], b: &[T], y: &mut [u8]) {
    check_nd(
        "compare_nd",
        p.out,
        &[(p.a_strides, a.len()), (p.b_strides, b.len())],
    );
    let (o, sa, sb) = (p.out, p.a_strides, p.b_strides);
    match op {
        CompareOp::Eq => zip_nd(o, sa, sb, a, b, y, |u: T, v| u8::from(u == v)),
        CompareOp::Less => zip_nd(o, sa, sb, a, b, y, |u: T, v| u8::from(u < v)),
        CompareOp::Greater => zip_nd(o, sa, sb, a, b, y, |u: T, v| u8::from(u > v)),
        CompareOp::LessEq => zip_nd(o, sa, sb, a, b, y, |u: T, v| u8::from(u <= v)),
        CompareOp::GreaterEq => zip_nd(o, sa, sb, a, b, y, |u: T, v| u8::from(u >= v)),
    }
}

/// ONNX `Where`: `y[i] = if cond[i] != 0 { a[i] } else { b[i] }` under rank-N broadcasting of
/// all three operands (see [`WhereNd`]). Any element type.
pub fn where_nd<T: Copy>(p: &WhereNd, cond: &[u8], a: &[T], b: &[T], y: &mut [T]) {
    check_nd(
        "where_nd",
        p.out,
        &[
            (p.cond_strides, cond.len()),
            (p.a_strides, a.len()),
            (p.b_strides, b.len()),
        ],
    );
    let so = contiguous(p.out);
    let mut l = Layout::<4>::new(p.out, |s, ax| match s {
        0 => so[ax],
        1 => p.cond_strides[ax] as isize,
        2 => p.a_strides[ax] as isize,
        _ => p.b_strides[ax] as isize,
    });
    let total = l.total();
    debug_assert!(y.len() >= total, "where_nd: y too short");
    if total == 0 {
        return;
    }
    l.simplify();
    let r = l.rank;
    let n = l.dims[r - 1];
    let (sc, sa, sb) = (
        l.strides[1][r - 1],
        l.strides[2][r - 1],
        l.strides[3][r - 1],
    );
    l.for_each_outer(r - 1, [0; 4], |[o, oc, oa, ob]| {
        let dst = &mut y[at(o)..at(o) + n];
        let (oc, oa, ob) = (at(oc), at(oa), at(ob));
        if (sc, sa, sb) == (1, 1, 1) {
            let src = cond[oc..oc + n]
                .iter()
                .zip(&a[oa..oa + n])
                .zip(&b[ob..ob + n]);
            for (d, ((&c, &u), &v)) in dst.iter_mut().zip(src) {
                *d = if c != 0 { u } else { v };
            }
        } else {
            for (j, d) in dst.iter_mut().enumerate() {
                let c = cond[oc + j * sc as usize];
                *d = if c != 0 {
                    a[oa + j * sa as usize]
                } else {
                    b[ob + j * sb as usize]
                };
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unary_math_hand_values() {
        let cases: [(UnaryMath, f32, f32); 12] = [
            (UnaryMath::Sqrt, 9.0, 3.0),
            (UnaryMath::Exp, 0.0, 1.0),
            (UnaryMath::Log, 1.0, 0.0),
            (UnaryMath::Neg, 2.5, -2.5),
            (UnaryMath::Abs, -2.5, 2.5),
            (UnaryMath::Reciprocal, 4.0, 0.25),
            (UnaryMath::Erf, 0.0, 0.0),
            (UnaryMath::Softsign, 3.0, 0.75),
            (UnaryMath::Elu { alpha: 2.0 }, 3.0, 3.0),
            (UnaryMath::Gelu, 0.0, 0.0),
            (UnaryMath::GeluTanh, 0.0, 0.0),
            (UnaryMath::Softplus, 1000.0, 1000.0),
        ];
        for (op, x, want) in cases {
            let mut y = [f32::NAN];
            unary_math(op, &[x], &mut y);
            assert_eq!(y[0], want, "{op:?}({x})");
            let mut d = [x];
            unary_math_inplace(op, &mut d);
            assert_eq!(d[0], want, "{op:?}({x}) in place");
        }
        // Softplus of a very negative x is e^x, not 0.
        let mut y = [0.0];
        unary_math(UnaryMath::Softplus, &[-50.0], &mut y);
        assert!((f64::from(y[0]) / (-50f64).exp() - 1.0).abs() < 1e-6);
    }
}
