//! 3x3 stride-2 max pooling, the downsampling pool of SqueezeNet, ResNet, DenseNet,
//! Inception-v2 and ShuffleNet, on planes of at most [`MAX_OW`] output columns: a kernel of
//! its own, tried by [`super::pool::max_pool2d`] before its general paths.
//!
//! Algorithm sketch (one plane, `L` lanes; columns outside the row read as `-inf`):
//!
//! ```text
//! h[r][j..j+L]   = max(c2, max(c1, c0))       per input row r, vector of outputs from j:
//!   c0, c1       = even, odd(row[2j - pl ..][..2L])       one deinterleaved pair of loads
//!   c2           = shift_in(c0, next pair's c0)           columns 2j + 2: one lane on
//! out[i][j..j+L] = max(h[r2], max(h[r1], h[r0]))   r0..r2 = 2i - pt + 0..3, inside the image
//! ```
//!
//! Each input row's horizontal maxima are computed once and the window's last row is kept
//! (`ring[0]`) for the next output row, whose first row it is. The loads past the row's ends
//! are masked and filled with `-inf`, which never wins, so the left padding and the ceil-mode
//! columns need no code of their own; the output rows whose three window rows are inside the
//! image (all but one or two per plane) run a straight line without branches on the window.
//!
//! **Why.** The general kernel ([`super::pool`]) handles any window and stride with scalar code
//! at the borders and a NaN bookkeeping per row; on these small planes (54, 27 or 28 output
//! columns) that overhead made it 2-4x slower than onnxruntime's pool on its blocked layout.
//!
//! Bit-identical to the portable kernel: a fold `m = x > m ? x : m` (`max(x, m)`, which returns
//! `m` on ties) over the window in row-major order keeps the first maximal element, and so does
//! folding each row first and then the rows in order. A NaN breaks that (the portable kernel
//! propagates the last NaN of the window), so a plane with a NaN in any row it reads is pooled
//! again by the portable kernel.

use core::ops::Range;

use super::vector::{array, Simd};
use crate::arch::portable;
use crate::arch::x86_64::avx2::blis::prefetch_run;
use crate::Pool2d;

/// The most output columns per row this kernel takes (SqueezeNet's 54, ResNet's 56): the
/// rows of horizontal maxima are stack arrays.
pub(crate) const MAX_OW: usize = 128;

/// The most vector loads one row takes: two per vector of outputs and a pair past the last,
/// at the narrowest lane count (8).
const MAX_LOADS: usize = 2 * MAX_OW / 8 + 2;

/// Runs `p` if it is a 3x3 stride-2 pool this kernel takes; `false` otherwise, with `out`
/// untouched.
///
/// **The rule**: a 3x3 window, stride 2, top and left padding at most 2, more than half a
/// vector and at most [`MAX_OW`] output columns. Narrower rows (Inception-v2's 14 -> 7 pool)
/// would leave most lanes idle and pay the per-row work for a handful of outputs: the
/// general kernel ran them faster.
#[inline(always)]
pub(crate) fn max_pool2d<S: Simd>(s: S, p: &Pool2d, input: &[f32], out: &mut [f32]) -> bool {
    let l = S::LANES;
    let [pt, pl, _, _] = p.pad;
    let ow_v = p.out_w.div_ceil(l) * l;
    if p.kh != 3
        || p.kw != 3
        || p.stride != [2, 2]
        || pt > 2
        || pl > 2
        || 2 * p.out_w <= l
        || p.out_h == 0
        || ow_v > MAX_OW
        || pl + p.w > 2 * ow_v
    {
        return false;
    }
    // Sizes whose products overflow, or empty planes, are left to the general kernel.
    let (Some(plane_in), Some(plane_out), Some(planes)) = (
        p.h.checked_mul(p.w).filter(|&n| n > 0),
        p.out_h.checked_mul(p.out_w),
        p.batch.checked_mul(p.channels),
    ) else {
        return false;
    };
    let (Some(need_in), Some(need_out)) =
        (planes.checked_mul(plane_in), planes.checked_mul(plane_out))
    else {
        return false;
    };
    assert!(input.len() >= need_in && out.len() >= need_out);
    let loads = Loads::new(s, p.w, pl);
    let mut ring = [[0.0f32; MAX_OW]; 3];
    let one = Pool2d {
        batch: 1,
        channels: 1,
        ..*p
    };
    for (x, y) in input
        .chunks_exact(plane_in)
        .zip(out.chunks_exact_mut(plane_out))
        .take(planes)
    {
        if !plane(s, p, &loads, ow_v, x, y, &mut ring) {
            portable::max_pool2d(&one, x, y);
        }
    }
    true
}

/// Pools one plane; `false` if a row it read holds a NaN (then `y` is partly written).
///
/// `ring[0]` carries the maxima of the last row of one output row's window, which is the first
/// row of the next one's. The output rows whose three window rows are all inside the image
/// (all but the first and the last one or two) run [`steady_row`], a straight line without
/// branches on the window; the others [`border_row`].
#[inline(always)]
fn plane<S: Simd>(
    s: S,
    p: &Pool2d,
    e: &Loads<S>,
    ow_v: usize,
    x: &[f32],
    y: &mut [f32],
    ring: &mut [[f32; MAX_OW]; 3],
) -> bool {
    let (w, ow) = (p.w, p.out_w);
    let pt = p.pad[0];
    for (i, out_row) in y.chunks_exact_mut(ow).enumerate() {
        // Input rows `r` and `r + 1` for the output row `AHEAD` rows on (its first two new
        // ones); past the plane's end the next plane's first rows (the planes are
        // contiguous), or nothing anyone reads, which a prefetch may touch.
        let r = (2 * (i + AHEAD) + 1).saturating_sub(pt);
        prefetch_run(x.as_ptr().wrapping_add(r * w), 2 * w);
        // The window's rows: `2i - pt ..= 2i - pt + 2`, some of them maybe outside the image.
        let top = (2 * i) as isize - pt as isize;
        let ok = if i > 0 && top + 2 < p.h as isize {
            let r = top as usize + 1;
            steady_row(s, e, &x[r * w..][..2 * w], ow_v, &mut ring[0], out_row)
        } else {
            border_row(s, p, e, ow_v, x, top, ring, out_row)
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Output rows between a row's computation and the prefetch of its input rows.
///
/// **Why.** In a network the pool reads what the layer before wrote, from L3 or memory (3 MiB
/// for ResNet-50's 64 x 112 x 112): the pool ran 2.3x its time on cached input there, and
/// these planes are a dozen 4 KiB pages each, so the hardware's page-bounded streams keep
/// restarting.
const AHEAD: usize = 4;

/// An output row whose window rows are all inside the image, the first one's maxima in `last`
/// (`rows` holds the other two): their maxima are computed and folded in registers, and the
/// third row's kept in `last` for the next output row. `false` if a row holds a NaN.
#[inline(always)]
fn steady_row<S: Simd>(
    s: S,
    e: &Loads<S>,
    rows: &[f32],
    ow_v: usize,
    last: &mut [f32; MAX_OW],
    out: &mut [f32],
) -> bool {
    let l = S::LANES;
    let (rb, rc) = rows.split_at(rows.len() / 2);
    let (mut b0, mut b1, nb) = pair(s, e, rb, 0);
    let (mut c0, mut c1, nc) = pair(s, e, rc, 0);
    let mut nan = s.mask_or(nb, nc);
    let mut j = 0;
    while j < ow_v {
        let k = 2 * (j + l) / l;
        let (nb0, nb1, nb) = pair(s, e, rb, k);
        let (nc0, nc1, nc) = pair(s, e, rc, k);
        nan = s.mask_or(nan, s.mask_or(nb, nc));
        let hb = s.max(s.shift_in(b0, nb0), s.max(b1, b0));
        let hc = s.max(s.shift_in(c0, nc0), s.max(c1, c0));
        let m = s.max(hc, s.max(hb, s.load(&last[j..])));
        s.store(&mut last[j..], hc);
        if j + l <= out.len() {
            s.store(&mut out[j..], m);
        } else {
            s.store_partial(&mut out[j..], m);
        }
        (b0, b1, c0, c1) = (nb0, nb1, nc0, nc1);
        j += l;
    }
    !s.mask_any(nan)
}

/// An output row whose window has rows outside the image (`top` is its first row's index):
/// the rows inside go through [`row_maxima`] (the window's third row into `ring[0]`, for the
/// next output row) and are folded in order. `false` if a row holds a NaN.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn border_row<S: Simd>(
    s: S,
    p: &Pool2d,
    e: &Loads<S>,
    ow_v: usize,
    x: &[f32],
    top: isize,
    ring: &mut [[f32; MAX_OW]; 3],
    out: &mut [f32],
) -> bool {
    let l = S::LANES;
    let w = p.w;
    // `ring[k]` for window row `2 - k`: the third row lands in `ring[0]`.
    let inside = |dy: usize| (0..p.h as isize).contains(&(top + dy as isize));
    for dy in (0..3).filter(|&dy| inside(dy)) {
        let r = (top + dy as isize) as usize;
        if !row_maxima(s, e, &x[r * w..][..w], ow_v, &mut ring[2 - dy]) {
            return false;
        }
    }
    let mut j = 0;
    while j < out.len() {
        let mut m = s.splat(f32::NEG_INFINITY);
        for dy in (0..3).filter(|&dy| inside(dy)) {
            m = s.max(s.load(&ring[2 - dy][j..]), m);
        }
        if j + l <= out.len() {
            s.store(&mut out[j..], m);
        } else {
            s.store_partial(&mut out[j..], m);
        }
        j += l;
    }
    true
}

/// The horizontal maxima of one input row (`h[j] = max(row[2j - pl ..= 2j - pl + 2])`, the
/// padding `-inf`) into `h[..ow_v]`; `false` if the row holds a NaN.
///
/// Per vector of outputs: one deinterleaved pair of loads gives the window's first and second
/// columns, and its third is the first shifted one lane on, taking the next vector's first
/// lane.
#[inline(always)]
fn row_maxima<S: Simd>(
    s: S,
    e: &Loads<S>,
    row: &[f32],
    ow_v: usize,
    h: &mut [f32; MAX_OW],
) -> bool {
    let l = S::LANES;
    // The pairs read columns `-pl .. 2 ow_v + 2 l - pl`, every column of the row
    // (`pl + w <= 2 ow_v`), so checking them finds any NaN.
    let (mut c0, mut c1, mut nan) = pair(s, e, row, 0);
    let mut j = 0;
    while j < ow_v {
        let (n0, n1, n) = pair(s, e, row, 2 * (j + l) / l);
        nan = s.mask_or(nan, n);
        let c2 = s.shift_in(c0, n0);
        s.store(&mut h[j..], s.max(c2, s.max(c1, c0)));
        (c0, c1) = (n0, n1);
        j += l;
    }
    !s.mask_any(nan)
}

/// The even and odd columns of loads `k` and `k + 1` of `row` (see [`Loads`]) in memory order,
/// and which lanes of the two hold a NaN. (A function, not a closure: a closure would not
/// inherit the caller's target features.)
#[inline(always)]
fn pair<S: Simd>(s: S, e: &Loads<S>, row: &[f32], k: usize) -> (S::V, S::V, S::M) {
    let (a, b) = (e.load(s, row, k), e.load(s, row, k + 1));
    let (even, odd) = s.deinterleave(a, b);
    (s.unpermute(even), s.unpermute(odd), s.unordered(a, b))
}

/// Where the vector loads of an input row fall, the same for every row of every plane: load
/// `k` reads `row[k L - pl ..][..L]`; those in `full` lie inside the row, the others read the
/// lanes `mask[k]` selects and take `-inf` in the rest.
///
/// **Why.** Only the first load and the last two or three cross a row's end, but working that
/// out per load (the clamps, the mask, the branches) was most of the kernel's instructions:
/// 40 cycles per vector of outputs on SqueezeNet's 256 x 54 x 54 pool (AMD EPYC Zen 5).
struct Loads<S: Simd> {
    /// The row's length and left padding.
    w: usize,
    pl: usize,
    /// The loads entirely inside the row.
    full: Range<usize>,
    /// Per load, the lanes inside the row (unused for the `full` ones).
    mask: [S::M; MAX_LOADS],
}

impl<S: Simd> Loads<S> {
    #[inline(always)]
    fn new(s: S, w: usize, pl: usize) -> Self {
        let l = S::LANES as isize;
        let at = |k: usize| k as isize * l - pl as isize;
        let inside = |k: usize| at(k) >= 0 && at(k) + l <= w as isize;
        let first = (0..MAX_LOADS).find(|&k| inside(k)).unwrap_or(0);
        let end = (first..MAX_LOADS)
            .find(|&k| !inside(k))
            .unwrap_or(MAX_LOADS);
        let mask = array(|k| {
            let lo = (-at(k)).clamp(0, l) as usize;
            let hi = (w as isize - at(k)).clamp(0, l) as usize;
            s.mask_range(lo, hi.max(lo))
        });
        Loads {
            w,
            pl,
            full: first..end,
            mask,
        }
    }

    /// Load `k` of `row`, `-inf` in the lanes outside it.
    #[inline(always)]
    fn load(&self, s: S, row: &[f32], k: usize) -> S::V {
        assert!(row.len() == self.w && k < MAX_LOADS);
        let at = (k * S::LANES) as isize - self.pl as isize;
        let p = row.as_ptr().wrapping_offset(at);
        if self.full.contains(&k) {
            // SAFETY: a `full` load's lanes `at .. at + LANES` lie inside the row (`new`),
            // whose length is `w` (checked above).
            return unsafe { s.load_ptr(p) };
        }
        let m = self.mask[k];
        // SAFETY: the mask selects the lanes whose addresses `at + lo .. at + hi` are inside
        // the row (`new`); the others are never read.
        let v = unsafe { s.load_masked_ptr(p, m) };
        s.select(m, v, s.splat(f32::NEG_INFINITY))
    }
}
