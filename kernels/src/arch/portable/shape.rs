//! Shape-generic data movement for every element type: [`transpose`], [`slice()`], [`expand`],
//! [`gather`], [`copy_into_axis`] / [`copy_from_axis`] (concat and split on any axis),
//! [`pad_nd`], [`cast`] / [`cast_to_bool`], [`range`] and [`nonzero`].
//!
//! Algorithm sketch.
//!
//! * **Transpose, slice and expand are one strided copy**: the output is contiguous, and
//!   output index `i` reads the input at `base + sum(i[a] * src_stride[a])` (a transpose's
//!   source strides are the input's strides permuted, a slice's are `step * input stride` from
//!   `base = sum(start * input stride)`, an expand's are 0 along broadcast axes). The index
//!   space is simplified first (`nd::Layout`: unit axes dropped, axes that stay adjacent and in
//!   order merged), then the innermost axis is
//!   - a `copy_from_slice` run when its source stride is 1 (the last axis stays last),
//!   - a fill when it is 0 (broadcast),
//!   - otherwise, if some other axis has source stride 1 (a transpose that moves the last
//!     axis), a 2-D transpose between that axis and the innermost one in `TILE` x `TILE`
//!     blocks, so that both the reads and the writes of a block stay within a few cache lines;
//!   - and a plain strided loop in what is left (e.g. a slice with a step on its last axis).
//! * **Gather** on `[outer, axis_len, inner]` first checks every index (so a bad one returns
//!   `Err` before anything is written), then copies one `inner` run per (outer, index).
//! * **Concat / split on any axis** are `[outer, part]` <-> `[outer, total]` column-block copies:
//!   one `copy_from_slice` per outer row.
//! * **Pad** walks the output's rows (all axes but the last). A row whose outer coordinates
//!   all map to the input (always, for edge and reflect) copies its input row into the middle
//!   and fills or mirrors the ends; in constant mode a row in the padding is one fill.
//! * **Cast** is an `as` per element through the sealed [`Element`] trait (numpy `astype`).
//! * **NonZero** is two passes the compiler sequences: [`nonzero_count`] sizes the output,
//!   [`nonzero`] writes the coordinates, decomposing each flat index with an odometer instead
//!   of divisions.

use super::nd::{at, contiguous, Layout, MAX_RANK};
use crate::dtype::{cast_one, Element, GatherIndex, Num};
use crate::{Expand, GatherError, PadMode, PadNd, Slice, Transpose};

/// Side of the square blocks of the tiled 2-D transpose: 16 x 16 elements of up to 8 bytes
/// read 16 cache lines and write 16, comfortably inside L1.
const TILE: usize = 16;

/// `y` (contiguous with `l`'s dims, operand 0) from `x` (operand 1, starting at `x_base`).
fn strided_copy<T: Copy>(mut l: Layout<2>, x_base: isize, x: &[T], y: &mut [T]) {
    let total = l.total();
    debug_assert!(y.len() >= total, "strided copy: y too short");
    if total == 0 {
        return;
    }
    let y = &mut y[..total];
    l.simplify();
    let r = l.rank;
    let n = l.dims[r - 1];
    let sx = l.strides[1][r - 1];
    match sx {
        1 => l.for_each_outer(r - 1, [0, x_base], |[o, i]| {
            y[at(o)..at(o) + n].copy_from_slice(&x[at(i)..at(i) + n]);
        }),
        0 => l.for_each_outer(r - 1, [0, x_base], |[o, i]| {
            y[at(o)..at(o) + n].fill(x[at(i)]);
        }),
        // The tiled path slices `x` from each block's origin, so it needs `sx > 0`; a
        // reversed innermost axis (only a slice makes one) takes the plain loop.
        _ => match (0..r - 1).find(|&a| sx > 0 && l.strides[1][a] == 1) {
            Some(q) => {
                // Bring the source-contiguous axis next to the innermost one; the outer
                // odometer then runs over everything else.
                l.move_axis(q, r - 2);
                let rows = l.dims[r - 2];
                let sy_row = l.strides[0][r - 2];
                l.for_each_outer(r - 2, [0, x_base], |[o, i]| {
                    transpose_2d(rows, n, sy_row, sx, &x[at(i)..], &mut y[at(o)..]);
                });
            }
            None => l.for_each_outer(r - 1, [0, x_base], |[o, i]| {
                for (j, d) in y[at(o)..at(o) + n].iter_mut().enumerate() {
                    *d = x[at(i + j as isize * sx)];
                }
            }),
        },
    }
}

/// `y[r * sy_row + c] = x[r + c * sx]` for `r < rows`, `c < cols`, in `TILE` x `TILE` blocks.
/// (`x` and `y` start at the block's origin.)
fn transpose_2d<T: Copy>(rows: usize, cols: usize, sy_row: isize, sx: isize, x: &[T], y: &mut [T]) {
    let mut r0 = 0;
    while r0 < rows {
        let r1 = (r0 + TILE).min(rows);
        let mut c0 = 0;
        while c0 < cols {
            let c1 = (c0 + TILE).min(cols);
            for r in r0..r1 {
                let row = &mut y[at(r as isize * sy_row) + c0..at(r as isize * sy_row) + c1];
                for (c, d) in (c0..c1).zip(row.iter_mut()) {
                    *d = x[at(r as isize + c as isize * sx)];
                }
            }
            c0 = c1;
        }
        r0 = r1;
    }
}

/// Checks the length of a shape and its companions against the rank limit.
fn check_rank(what: &str, rank: usize, others: &[usize]) {
    assert!(rank <= MAX_RANK, "{what}: rank {rank} > {MAX_RANK}");
    debug_assert!(
        others.iter().all(|&n| n == rank),
        "{what}: geometry lengths {others:?} differ from the rank {rank}"
    );
}

/// ONNX `Transpose`: `y[i_0, .., i_r] = x[j]` with `j[perm[k]] = i_k`; `y` has dims
/// `shape[perm[k]]`. Any element type, rank 0 to 8.
pub fn transpose<T: Copy>(p: &Transpose, x: &[T], y: &mut [T]) {
    let rank = p.shape.len();
    check_rank("transpose", rank, &[p.perm.len()]);
    let total: usize = p.shape.iter().product();
    debug_assert!(x.len() >= total, "transpose: x too short");
    debug_assert!(y.len() >= total, "transpose: y too short");
    let mut out = [0usize; MAX_RANK];
    for (o, &a) in out.iter_mut().zip(p.perm) {
        *o = p.shape[a];
    }
    let out = &out[..rank];
    let si = contiguous(p.shape);
    let so = contiguous(out);
    let l = Layout::new(out, |s, a| if s == 0 { so[a] } else { si[p.perm[a]] });
    strided_copy(l, 0, x, y);
}

/// ONNX `Slice` with exact, in-range `starts`, nonzero `steps` and the output dims: see
/// [`Slice`]. Any element type, rank 0 to 8.
pub fn slice<T: Copy>(p: &Slice, x: &[T], y: &mut [T]) {
    let rank = p.shape.len();
    check_rank("slice", rank, &[p.starts.len(), p.steps.len(), p.out.len()]);
    debug_assert!(x.len() >= p.shape.iter().product(), "slice: x too short");
    debug_assert!(p.steps.iter().all(|&s| s != 0), "slice: zero step");
    let si = contiguous(p.shape);
    let so = contiguous(p.out);
    // An empty output never reads, so its starts need not be in range.
    let base = if p.out.contains(&0) {
        0
    } else {
        (0..rank).map(|a| p.starts[a] as isize * si[a]).sum()
    };
    let l = Layout::new(
        p.out,
        |s, a| {
            if s == 0 {
                so[a]
            } else {
                p.steps[a] * si[a]
            }
        },
    );
    strided_copy(l, base, x, y);
}

/// ONNX `Expand` (and any broadcast copy): see [`Expand`]. Any element type, rank 0 to 8.
pub fn expand<T: Copy>(p: &Expand, x: &[T], y: &mut [T]) {
    check_rank("expand", p.out.len(), &[p.strides.len()]);
    let so = contiguous(p.out);
    let l = Layout::new(
        p.out,
        |s, a| {
            if s == 0 {
                so[a]
            } else {
                p.strides[a] as isize
            }
        },
    );
    strided_copy(l, 0, x, y);
}

/// ONNX `Gather`: `x` viewed as `[outer, axis_len, inner]`, `y` as
/// `[outer, indices.len(), inner]`, `y[o, j, :] = x[o, indices[j], :]`. A negative index counts
/// from the end; an index outside `[-axis_len, axis_len)` returns the first such one as an
/// error and leaves `y` unwritten. `indices` is `i64` or `i32`.
pub fn gather<T: Copy, I: GatherIndex>(
    outer: usize,
    axis_len: usize,
    inner: usize,
    x: &[T],
    indices: &[I],
    y: &mut [T],
) -> Result<(), GatherError> {
    let len = axis_len as i64;
    for (position, &i) in indices.iter().enumerate() {
        let index = i.to_i64();
        if index < -len || index >= len {
            return Err(GatherError {
                position,
                index,
                len: axis_len,
            });
        }
    }
    debug_assert!(x.len() >= outer * axis_len * inner, "gather: x too short");
    debug_assert!(
        y.len() >= outer * indices.len() * inner,
        "gather: y too short"
    );
    if inner == 0 || indices.is_empty() {
        return Ok(());
    }
    let rows = y[..outer * indices.len() * inner].chunks_exact_mut(inner);
    for (r, dst) in rows.enumerate() {
        let (o, j) = (r / indices.len(), r % indices.len());
        let i = indices[j].to_i64();
        let i = if i < 0 { i + len } else { i } as usize;
        let from = (o * axis_len + i) * inner;
        dst.copy_from_slice(&x[from..from + inner]);
    }
    Ok(())
}

/// Concat on any axis: `x` viewed as `[outer, part]` is written into columns
/// `offset..offset + part` of `y` viewed as `[outer, total]` (for an axis `a`,
/// `part = x.dims[a] * inner` and `offset = (dims of the earlier inputs on a) * inner`).
pub fn copy_into_axis<T: Copy>(
    outer: usize,
    part: usize,
    total: usize,
    offset: usize,
    x: &[T],
    y: &mut [T],
) {
    debug_assert!(
        offset + part <= total,
        "copy_into_axis: columns out of range"
    );
    debug_assert!(x.len() >= outer * part, "copy_into_axis: x too short");
    debug_assert!(y.len() >= outer * total, "copy_into_axis: y too short");
    if part == 0 {
        return;
    }
    for (o, src) in x[..outer * part].chunks_exact(part).enumerate() {
        let at = o * total + offset;
        y[at..at + part].copy_from_slice(src);
    }
}

/// Split on any axis, the inverse of [`copy_into_axis`]: columns `offset..offset + part` of `x`
/// viewed as `[outer, total]` are written to `y` viewed as `[outer, part]`.
pub fn copy_from_axis<T: Copy>(
    outer: usize,
    part: usize,
    total: usize,
    offset: usize,
    x: &[T],
    y: &mut [T],
) {
    debug_assert!(
        offset + part <= total,
        "copy_from_axis: columns out of range"
    );
    debug_assert!(x.len() >= outer * total, "copy_from_axis: x too short");
    debug_assert!(y.len() >= outer * part, "copy_from_axis: y too short");
    if part == 0 {
        return;
    }
    for (o, dst) in y[..outer * part].chunks_exact_mut(part).enumerate() {
        let at = o * total + offset;
        dst.copy_from_slice(&x[at..at + part]);
    }
}

/// The input coordinate output coordinate `o` reads along an axis of length `n` padded by
/// `before`, or `None` for a constant-mode border.
#[inline]
fn source(mode: PadMode, o: usize, before: usize, n: usize) -> Option<usize> {
    if o >= before && o - before < n {
        return Some(o - before);
    }
    match mode {
        PadMode::Constant => None,
        PadMode::Edge => Some(if o < before { 0 } else { n - 1 }),
        // Mirror about the first / last element: -c -> c, n - 1 + c -> n - 1 - c.
        PadMode::Reflect => Some(if o < before {
            before - o
        } else {
            2 * (n - 1) + before - o
        }),
    }
}

/// ONNX `Pad` on any rank (0 to 8): see [`PadNd`] and [`PadMode`]; `value` fills the border in
/// constant mode (ignored otherwise).
pub fn pad_nd<T: Copy>(p: &PadNd, x: &[T], y: &mut [T], value: T) {
    let rank = p.shape.len();
    check_rank("pad_nd", rank, &[p.before.len(), p.after.len()]);
    let mut out = [1usize; MAX_RANK];
    for (a, o) in out[..rank].iter_mut().enumerate() {
        *o = p.before[a] + p.shape[a] + p.after[a];
    }
    let total: usize = out[..rank].iter().product();
    debug_assert!(x.len() >= p.shape.iter().product(), "pad_nd: x too short");
    debug_assert!(y.len() >= total, "pad_nd: y too short");
    if total == 0 {
        return;
    }
    if rank == 0 {
        y[0] = x[0];
        return;
    }
    let si = contiguous(p.shape);
    let last = rank - 1;
    let (n, before) = (p.shape[last], p.before[last]);
    let width = out[last];
    let mut idx = [0usize; MAX_RANK];
    for dst in y[..total].chunks_exact_mut(width) {
        // The input row this output row reads, if any.
        let mut row = Some(0usize);
        for a in 0..last {
            row = match (row, source(p.mode, idx[a], p.before[a], p.shape[a])) {
                (Some(r), Some(i)) => Some(r + i * si[a] as usize),
                _ => None,
            };
        }
        match row {
            None => dst.fill(value),
            Some(r) => {
                let src = &x[r..r + n];
                dst[before..before + n].copy_from_slice(src);
                match p.mode {
                    PadMode::Constant => {
                        dst[..before].fill(value);
                        dst[before + n..].fill(value);
                    }
                    mode => {
                        for o in (0..before).chain(before + n..width) {
                            // Edge and reflect always map inside the row.
                            if let Some(i) = source(mode, o, before, n) {
                                dst[o] = src[i];
                            }
                        }
                    }
                }
            }
        }
        // Next output row.
        let mut a = last;
        while a > 0 {
            a -= 1;
            idx[a] += 1;
            if idx[a] < out[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

/// `y[i] = x[i] as D` with numpy `astype` semantics: float to int truncates toward zero and
/// saturates (NaN is 0), int to float rounds to nearest, int to int wraps. For `bool`
/// targets use [`cast_to_bool`].
pub fn cast<S: Element, D: Element>(x: &[S], y: &mut [D]) {
    debug_assert!(y.len() >= x.len(), "cast: y too short");
    for (d, &s) in y.iter_mut().zip(x) {
        *d = cast_one(s);
    }
}

/// `y[i] = (x[i] != 0) as u8`, a `bool` stored as 0/1 (NaN is true, as in numpy).
pub fn cast_to_bool<S: Element>(x: &[S], y: &mut [u8]) {
    debug_assert!(y.len() >= x.len(), "cast_to_bool: y too short");
    for (d, &s) in y.iter_mut().zip(x) {
        // `!=` rather than `!(==)`-free tricks: NaN != 0 is true, which is what we want.
        *d = u8::from(s != S::ZERO);
    }
}

/// ONNX `Range` (numpy `arange`): `y[i] = start + i * delta` for every `i` in `y` (the compiler
/// sizes `y` as `max(ceil((limit - start) / delta), 0)`). Floats compute in `f64` and round
/// once, so there is no drift along long ranges; integers wrap.
pub fn range<T: Num>(start: T, delta: T, y: &mut [T]) {
    for (i, d) in y.iter_mut().enumerate() {
        *d = T::range_at(start, delta, i);
    }
}

/// The number of nonzero elements of `x` (NaN counts as nonzero): the output length of ONNX
/// `NonZero`, which generated code computes before calling [`nonzero`].
pub fn nonzero_count<T: Element>(x: &[T]) -> usize {
    x.iter().filter(|&&v| v != T::ZERO).count()
}

/// ONNX `NonZero`: `y` is `[rank, count]` `i64` (`count` from [`nonzero_count`]); column `j`
/// holds the coordinates of the `j`-th nonzero element of `x` (dims `shape`) in row-major
/// order. A rank-0 `x` is treated as shape `[1]` (as ONNX Runtime does), so `y` is
/// `[1, count]`.
pub fn nonzero<T: Element>(shape: &[usize], count: usize, x: &[T], y: &mut [i64]) {
    let shape: &[usize] = if shape.is_empty() { &[1] } else { shape };
    let rank = shape.len();
    assert!(rank <= MAX_RANK, "nonzero: rank {rank} > {MAX_RANK}");
    let total: usize = shape.iter().product();
    debug_assert!(x.len() >= total, "nonzero: x too short");
    debug_assert!(y.len() >= rank * count, "nonzero: y too short");
    debug_assert!(
        nonzero_count(&x[..total]) == count,
        "nonzero: count does not match x"
    );
    let mut idx = [0usize; MAX_RANK];
    let mut j = 0;
    for &v in &x[..total] {
        if v != T::ZERO {
            for a in 0..rank {
                y[a * count + j] = idx[a] as i64;
            }
            j += 1;
        }
        let mut a = rank;
        while a > 0 {
            a -= 1;
            idx[a] += 1;
            if idx[a] < shape[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}
