//! Element-wise kernels: activations ([`unary`], [`unary_inplace`]) and broadcasting binary
//! arithmetic ([`binary`], [`binary_inplace`]), plus the whole-slice map helpers the other
//! families reuse.
//!
//! Algorithm sketch.
//!
//! * Maps run four vectors per iteration, then single vectors. A remainder shorter than a
//!   vector is handled without scalar code: out of place, the last full vector is recomputed
//!   ending at the last element (same input, same result); in place, the last vector is
//!   loaded *before* the main loop overwrites it and is processed and stored at the end.
//!   Only slices shorter than one vector use masked loads and stores.
//! * Binary: the broadcast strides are first simplified. Size-1 dimensions are dropped and
//!   neighbours merged when both operands step through them as one (`stride[d] ==
//!   stride[d+1] * shape[d+1]`), so "same shape" becomes one long row, a per-channel operand
//!   `[1, C, 1, 1]` becomes rows of `H * W` against one scalar each, and a scalar operand one
//!   row against one scalar. The innermost row is then vector-vector, vector-scalar or
//!   scalar-vector; any other inner stride (a transposed operand) goes to the portable kernel.
//!   Remainders of a row use the scalar operation, which is the same IEEE operation, so the
//!   results are bit-identical to the portable kernel's.
//!
//! ReLU, clip and leaky ReLU are bit-identical to the portable kernel too (see
//! [`super::math`]); sigmoid and tanh agree to a few ulp.

use super::math::{specialise, Act};
use super::vector::Simd;
use crate::arch::portable;
use crate::{Activation, BinaryOp, Broadcast};

/// `out[i] = act(input[i])` for every `i` in `input`.
#[inline(always)]
pub(crate) fn unary<S: Simd>(s: S, act: Activation, input: &[f32], out: &mut [f32]) {
    let out = &mut out[..input.len()];
    specialise!(s, act, a => map(s, PlusZeroThen(a), input, out));
}

/// `data[i] = act(data[i])`.
#[inline(always)]
pub(crate) fn unary_inplace<S: Simd>(s: S, act: Activation, data: &mut [f32]) {
    // The portable epilogue skips the identity in place (so -0.0 stays -0.0 there).
    if act == Activation::None {
        return;
    }
    specialise!(s, act, a => map_inplace(s, PlusZeroThen(a), data));
}

/// `act(x + 0.0)`. The portable kernels run activations through the epilogue
/// `act(x * 1.0 + 0.0)`, which turns -0.0 into +0.0 before the activation (the multiplication
/// is exact); adding zero keeps these kernels bit-identical to them.
#[derive(Clone, Copy)]
struct PlusZeroThen<A>(A);

impl<S: Simd, A: Act<S>> Act<S> for PlusZeroThen<A> {
    #[inline(always)]
    fn apply(self, s: S, v: S::V) -> S::V {
        self.0.apply(s, s.add(v, s.zero()))
    }
}

/// `dst[i] = f(src[i])` for `i < src.len()`; see the module docs for the remainder.
#[inline(always)]
pub(crate) fn map<S: Simd, F: Act<S>>(s: S, f: F, src: &[f32], dst: &mut [f32]) {
    let n = src.len();
    let dst = &mut dst[..n];
    let l = S::LANES;
    if n < l {
        let v = s.load_partial(src);
        s.store_partial(dst, f.apply(s, v));
        return;
    }
    let mut xs = src.chunks_exact(4 * l);
    let mut ys = dst.chunks_exact_mut(4 * l);
    for (x, y) in (&mut xs).zip(&mut ys) {
        let v0 = f.apply(s, s.load(x));
        let v1 = f.apply(s, s.load(&x[l..]));
        let v2 = f.apply(s, s.load(&x[2 * l..]));
        let v3 = f.apply(s, s.load(&x[3 * l..]));
        s.store(y, v0);
        s.store(&mut y[l..], v1);
        s.store(&mut y[2 * l..], v2);
        s.store(&mut y[3 * l..], v3);
    }
    let done = n - xs.remainder().len();
    let mut i = done;
    while i + l <= n {
        s.store(&mut dst[i..], f.apply(s, s.load(&src[i..])));
        i += l;
    }
    if i < n {
        s.store(&mut dst[n - l..], f.apply(s, s.load(&src[n - l..])));
    }
}

/// `data[i] = f(data[i])`; see the module docs for the remainder.
#[inline(always)]
pub(crate) fn map_inplace<S: Simd, F: Act<S>>(s: S, f: F, data: &mut [f32]) {
    let n = data.len();
    let l = S::LANES;
    if n < l {
        let v = s.load_partial(data);
        s.store_partial(data, f.apply(s, v));
        return;
    }
    // Read before the loop below overwrites any of it.
    let last = s.load(&data[n - l..]);
    let mut chunks = data.chunks_exact_mut(4 * l);
    for y in &mut chunks {
        let v0 = f.apply(s, s.load(y));
        let v1 = f.apply(s, s.load(&y[l..]));
        let v2 = f.apply(s, s.load(&y[2 * l..]));
        let v3 = f.apply(s, s.load(&y[3 * l..]));
        s.store(y, v0);
        s.store(&mut y[l..], v1);
        s.store(&mut y[2 * l..], v2);
        s.store(&mut y[3 * l..], v3);
    }
    let mut i = n - chunks.into_remainder().len();
    while i + l <= n {
        let v = f.apply(s, s.load(&data[i..]));
        s.store(&mut data[i..], v);
        i += l;
    }
    if i < n {
        s.store(&mut data[n - l..], f.apply(s, last));
    }
}

/// A binary operation on vectors and on scalars (the same IEEE operation).
trait Op<S: Simd>: Copy {
    fn v(self, s: S, a: S::V, b: S::V) -> S::V;
    fn f(self, a: f32, b: f32) -> f32;
}

/// One of the four operations, fixed at compile time.
#[derive(Clone, Copy)]
struct Fixed<const OP: u8>;
const ADD: u8 = 0;
const SUB: u8 = 1;
const MUL: u8 = 2;
const DIV: u8 = 3;

impl<S: Simd, const OP: u8> Op<S> for Fixed<OP> {
    #[inline(always)]
    fn v(self, s: S, a: S::V, b: S::V) -> S::V {
        match OP {
            ADD => s.add(a, b),
            SUB => s.sub(a, b),
            MUL => s.mul(a, b),
            _ => s.div(a, b),
        }
    }
    #[inline(always)]
    fn f(self, a: f32, b: f32) -> f32 {
        match OP {
            ADD => BinaryOp::Add.apply(a, b),
            SUB => BinaryOp::Sub.apply(a, b),
            MUL => BinaryOp::Mul.apply(a, b),
            _ => BinaryOp::Div.apply(a, b),
        }
    }
}

/// `O` with its operands swapped: in place with the accumulator on the right.
#[derive(Clone, Copy)]
struct Flip<O>(O);

impl<S: Simd, O: Op<S>> Op<S> for Flip<O> {
    #[inline(always)]
    fn v(self, s: S, a: S::V, b: S::V) -> S::V {
        self.0.v(s, b, a)
    }
    #[inline(always)]
    fn f(self, a: f32, b: f32) -> f32 {
        self.0.f(b, a)
    }
}

/// Runs `$body` with `$o` bound to the [`Fixed`] operation of `$op`.
macro_rules! with_op {
    ($op:expr, $o:ident => $body:expr) => {
        match $op {
            BinaryOp::Add => {
                let $o = Fixed::<ADD>;
                $body
            }
            BinaryOp::Sub => {
                let $o = Fixed::<SUB>;
                $body
            }
            BinaryOp::Mul => {
                let $o = Fixed::<MUL>;
                $body
            }
            BinaryOp::Div => {
                let $o = Fixed::<DIV>;
                $body
            }
        }
    };
}

/// A broadcast with size-1 dimensions dropped and mergeable neighbours merged; see the
/// module docs. Dimension 3 is the innermost; unused outer dimensions have size 1.
struct Simplified {
    shape: [usize; 4],
    sa: [usize; 4],
    sb: [usize; 4],
}

fn simplify(shape: [usize; 4], sa: [usize; 4], sb: [usize; 4]) -> Simplified {
    let mut dims = [(1usize, 0usize, 0usize); 4];
    let mut n = 0;
    for d in 0..4 {
        if shape[d] == 1 {
            continue;
        }
        let (size, a, b) = (shape[d], sa[d], sb[d]);
        if n > 0 {
            let (outer, oa, ob) = dims[n - 1];
            // Stepping the outer index once moves both operands exactly one full inner
            // extent: the two dimensions are one. (A product that overflows cannot be a
            // real stride, so it simply prevents the merge.)
            if Some(oa) == a.checked_mul(size) && Some(ob) == b.checked_mul(size) {
                dims[n - 1] = (outer * size, a, b);
                continue;
            }
        }
        dims[n] = (size, a, b);
        n += 1;
    }
    let mut out = Simplified {
        shape: [1; 4],
        sa: [0; 4],
        sb: [0; 4],
    };
    // Right-align: the innermost dimension goes to index 3.
    for (i, &dim) in dims[..n].iter().enumerate() {
        let d = 4 - n + i;
        (out.shape[d], out.sa[d], out.sb[d]) = dim;
    }
    out
}

/// The innermost rows of a simplified broadcast as `(out, a, b)` element offsets, in output
/// order. (An iterator rather than a callback: the loop bodies are the hot code, and they must
/// stay inside the `#[target_feature]` function, which a closure's body is not.)
struct Rows<'a> {
    g: &'a Simplified,
    idx: [usize; 3],
    out: usize,
    left: usize,
}

impl<'a> Rows<'a> {
    fn new(g: &'a Simplified) -> Self {
        Rows {
            g,
            idx: [0; 3],
            out: 0,
            left: g.shape[0] * g.shape[1] * g.shape[2],
        }
    }
}

impl Iterator for Rows<'_> {
    type Item = (usize, usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let (g, i) = (self.g, self.idx);
        let a = i[0] * g.sa[0] + i[1] * g.sa[1] + i[2] * g.sa[2];
        let b = i[0] * g.sb[0] + i[1] * g.sb[1] + i[2] * g.sb[2];
        let item = (self.out, a, b);
        self.out += g.shape[3];
        // Odometer increment, innermost outer index first.
        for d in (0..3).rev() {
            self.idx[d] += 1;
            if self.idx[d] < g.shape[d] {
                break;
            }
            self.idx[d] = 0;
        }
        Some(item)
    }
}

/// `out = a op b` with broadcasting; see [`Broadcast`].
#[inline(always)]
pub(crate) fn binary<S: Simd>(
    s: S,
    op: BinaryOp,
    bc: &Broadcast,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
) {
    let total = bc.shape.iter().try_fold(1usize, |t, &d| t.checked_mul(d));
    let g = simplify(bc.shape, bc.a_strides, bc.b_strides);
    if total.is_none_or(|t| t == 0) || g.sa[3] > 1 || g.sb[3] > 1 {
        portable::binary(op, bc, a, b, out);
        return;
    }
    let n = g.shape[3];
    with_op!(op, o => {
        for (io, ia, ib) in Rows::new(&g) {
            let dst = &mut out[io..io + n];
            match (g.sa[3], g.sb[3]) {
                (1, 1) => vv(s, o, &a[ia..ia + n], &b[ib..ib + n], dst),
                (1, _) => vs(s, o, &a[ia..ia + n], b[ib], dst),
                (_, 1) => vs(s, Flip(o), &b[ib..ib + n], a[ia], dst),
                _ => dst.fill(Op::<S>::f(o, a[ia], b[ib])),
            }
        }
    });
}

/// In place, with `acc` contiguous with `bc.shape` and holding the result. With
/// `acc_is_lhs`, `acc = acc op other` and `other` follows `bc.b_strides`; otherwise
/// `acc = other op acc` and `other` follows `bc.a_strides`.
#[inline(always)]
pub(crate) fn binary_inplace<S: Simd>(
    s: S,
    op: BinaryOp,
    bc: &Broadcast,
    acc: &mut [f32],
    other: &[f32],
    acc_is_lhs: bool,
) {
    let total = bc.shape.iter().try_fold(1usize, |t, &d| t.checked_mul(d));
    let so = if acc_is_lhs {
        bc.b_strides
    } else {
        bc.a_strides
    };
    // The accumulator is contiguous, so its strides are the row-major ones of the shape.
    let mut sacc = [0; 4];
    let mut step = 1usize;
    for d in (0..4).rev() {
        sacc[d] = step;
        step = step.saturating_mul(bc.shape[d]);
    }
    let g = simplify(bc.shape, sacc, so);
    if total.is_none_or(|t| t == 0) || g.sb[3] > 1 {
        portable::binary_inplace(op, bc, acc, other, acc_is_lhs);
        return;
    }
    let n = g.shape[3];
    with_op!(op, o => {
        if acc_is_lhs {
            inplace_rows(s, o, &g, n, acc, other);
        } else {
            inplace_rows(s, Flip(o), &g, n, acc, other);
        }
    });
}

#[inline(always)]
fn inplace_rows<S: Simd, O: Op<S>>(
    s: S,
    o: O,
    g: &Simplified,
    n: usize,
    acc: &mut [f32],
    other: &[f32],
) {
    for (io, _, ib) in Rows::new(g) {
        let dst = &mut acc[io..io + n];
        if g.sb[3] == 1 {
            vv_inplace(s, o, dst, &other[ib..ib + n]);
        } else {
            vs_inplace(s, o, dst, other[ib]);
        }
    }
}

/// `dst[i] = a[i] op b[i]`.
#[inline(always)]
fn vv<S: Simd, O: Op<S>>(s: S, o: O, a: &[f32], b: &[f32], dst: &mut [f32]) {
    let l = S::LANES;
    let n = dst.len();
    let (a, b) = (&a[..n], &b[..n]);
    let mut i = 0;
    while i + 2 * l <= n {
        let v0 = o.v(s, s.load(&a[i..]), s.load(&b[i..]));
        let v1 = o.v(s, s.load(&a[i + l..]), s.load(&b[i + l..]));
        s.store(&mut dst[i..], v0);
        s.store(&mut dst[i + l..], v1);
        i += 2 * l;
    }
    if i + l <= n {
        s.store(&mut dst[i..], o.v(s, s.load(&a[i..]), s.load(&b[i..])));
        i += l;
    }
    for j in i..n {
        dst[j] = o.f(a[j], b[j]);
    }
}

/// `dst[i] = a[i] op b`.
#[inline(always)]
fn vs<S: Simd, O: Op<S>>(s: S, o: O, a: &[f32], b: f32, dst: &mut [f32]) {
    let l = S::LANES;
    let n = dst.len();
    let a = &a[..n];
    let bv = s.splat(b);
    let mut i = 0;
    while i + 2 * l <= n {
        let v0 = o.v(s, s.load(&a[i..]), bv);
        let v1 = o.v(s, s.load(&a[i + l..]), bv);
        s.store(&mut dst[i..], v0);
        s.store(&mut dst[i + l..], v1);
        i += 2 * l;
    }
    if i + l <= n {
        s.store(&mut dst[i..], o.v(s, s.load(&a[i..]), bv));
        i += l;
    }
    for j in i..n {
        dst[j] = o.f(a[j], b);
    }
}

/// `acc[i] = acc[i] op b[i]`.
#[inline(always)]
fn vv_inplace<S: Simd, O: Op<S>>(s: S, o: O, acc: &mut [f32], b: &[f32]) {
    let l = S::LANES;
    let n = acc.len();
    let b = &b[..n];
    let mut i = 0;
    while i + 2 * l <= n {
        let v0 = o.v(s, s.load(&acc[i..]), s.load(&b[i..]));
        let v1 = o.v(s, s.load(&acc[i + l..]), s.load(&b[i + l..]));
        s.store(&mut acc[i..], v0);
        s.store(&mut acc[i + l..], v1);
        i += 2 * l;
    }
    if i + l <= n {
        let v = o.v(s, s.load(&acc[i..]), s.load(&b[i..]));
        s.store(&mut acc[i..], v);
        i += l;
    }
    for j in i..n {
        acc[j] = o.f(acc[j], b[j]);
    }
}

/// `acc[i] = acc[i] op b`.
#[inline(always)]
fn vs_inplace<S: Simd, O: Op<S>>(s: S, o: O, acc: &mut [f32], b: f32) {
    let l = S::LANES;
    let n = acc.len();
    let bv = s.splat(b);
    let mut i = 0;
    while i + 2 * l <= n {
        let v0 = o.v(s, s.load(&acc[i..]), bv);
        let v1 = o.v(s, s.load(&acc[i + l..]), bv);
        s.store(&mut acc[i..], v0);
        s.store(&mut acc[i + l..], v1);
        i += 2 * l;
    }
    if i + l <= n {
        let v = o.v(s, s.load(&acc[i..]), bv);
        s.store(&mut acc[i..], v);
        i += l;
    }
    for x in &mut acc[i..] {
        *x = o.f(*x, b);
    }
}
