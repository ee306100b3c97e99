//! Convolution as GEMM for the SIMD ISAs ([`conv2d_gemm`]), and its implicit im2col: the
//! packer that reads a convolution's right-hand matrix straight from the NCHW input into the
//! GEMM's packed panel, so no im2col matrix is ever written (and no scratch is needed).
//!
//! For one (image, group) the convolution is `out[c_out/g, oh*ow] = W[c_out/g, k] * B[k, oh*ow]`
//! with `k = (c_in/g) * kh * kw`, row `p = (ci, ky, kx)` and column `j = (oy, ox)` of `B` being
//! the input element under tap `(ky, kx)` of output `(oy, ox)`, or zero in the padding.
//!
//! Algorithm sketch for one panel (rows `pc..pc + kc`, columns `jc..jc + nc`):
//!
//! ```text
//! for p in pc..pc + kc:                       // (ci, ky, kx) counted up, not divided out
//!     rows, cols = output rows / columns whose input is inside the image for this tap
//!     if stride 1 and ow == w:
//!         the row is input[ci][j + (ky*dh - pt)*w + kx*dw - pl] for every j whose oy is in
//!         rows (zero for the others): one straight copy (into the packed layout directly
//!         when the panel lies wholly inside), then zeros where ox is outside cols
//!     else:
//!         for each output row the panel touches: zeros | gather(stride sw) | zeros
//!         into a row buffer, then into the packed layout
//! ```
//!
//! The first case is every "same" stride-1 convolution (ResNet's 3x3 layers): moving along
//! an output row moves along the input row, and moving to the next output row moves to the
//! next input row, so the whole panel row is one run of the input plane. The packer runs once
//! per element of `B` and the GEMM reuses each packed element for every output channel, so
//! with few output channels (64) its speed matters: it does no division per element or
//! segment and no library call per short run.

use core::ops::Range;

use super::blis::{
    self, packed_len, prefetch, scatter_row, Bias, MicroKernel, PackB, PanelLayout, RowMajor,
    NC_MAX,
};
use super::lanes::Lanes;
use crate::par::Parallel;
use crate::{Activation, Conv2d};

/// The convolution on micro-kernel `K`, for the non-depthwise branches; `res`, a residual
/// operand laid out as `out`, is added in the GEMM's epilogue.
///
/// Panics if a slice is shorter than the shapes in `p` require.
///
/// # Safety
///
/// The CPU has every feature `K` needs; `inline(always)` compiles it inside the caller's
/// `#[target_feature]` function.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the vector token and the threads.
pub(crate) unsafe fn conv2d_gemm<K: MicroKernel<NR> + Lanes + Sync, const NR: usize>(
    s: K,
    par: &dyn Parallel,
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    res: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    let cig = p.c_in / p.groups;
    let cog = p.c_out / p.groups;
    let in_plane = p.h * p.w;
    let out_plane = p.out_h * p.out_w;
    let k = cig * p.kh * p.kw;
    if out_plane == 0 || cog == 0 {
        return;
    }
    for n in 0..p.batch {
        for g in 0..p.groups {
            let src = &input[(n * p.c_in + g * cig) * in_plane..][..cig * in_plane];
            let g_out = &mut out[(n * p.c_out + g * cog) * out_plane..][..cog * out_plane];
            let gemm = blis::Gemm {
                m: cog,
                n: out_plane,
                k,
                a: &weight[g * cog * k..][..cog * k],
                lda: k,
                a_blocked: true,
                c: g_out,
                ldc: out_plane,
                bias: bias.map_or(Bias::None, |b| Bias::Row(&b[g * cog..][..cog])),
                res: res.map(|r| &r[(n * p.c_out + g * cog) * out_plane..][..cog * out_plane]),
                act,
            };
            // SAFETY: the caller guarantees the CPU features.
            unsafe {
                if p.is_pointwise() {
                    run::<K, NR, _>(
                        par,
                        gemm,
                        &RowMajor {
                            data: src,
                            ld: in_plane,
                            in_place: true,
                        },
                    );
                } else {
                    run::<K, NR, _>(par, gemm, &Im2col { s, p, src });
                }
            }
        }
    }
}

/// [`blis::gemm_par`], kept as one call site per packer.
///
/// # Safety
///
/// As for [`blis::gemm`].
#[inline(always)]
unsafe fn run<K: MicroKernel<NR>, const NR: usize, B: PackB + Sync>(
    par: &dyn Parallel,
    g: blis::Gemm<'_>,
    b: &B,
) {
    // SAFETY: forwarded from the caller.
    unsafe { blis::gemm_par::<K, NR, B>(par, g, b) }
}

/// Output positions `o` in `0..out_len` for which the input coordinate
/// `o * stride + offset - pad` lies in `0..in_len`; they form one range because the coordinate
/// grows with `o`.
fn valid_range(
    out_len: usize,
    in_len: usize,
    pad: usize,
    offset: usize,
    stride: usize,
) -> Range<usize> {
    // o * stride + offset >= pad  <=>  o >= ceil((pad - offset) / stride).
    let lo = if offset >= pad {
        0
    } else {
        (pad - offset).div_ceil(stride)
    };
    // o * stride + offset < in_len + pad  <=>  o < ceil((in_len + pad - offset) / stride).
    let hi = if offset >= in_len + pad {
        0
    } else {
        (in_len + pad - offset).div_ceil(stride)
    };
    let hi = hi.min(out_len);
    lo.min(hi)..hi
}

/// Kernel extents up to this have their valid ranges tabulated once per panel.
const TAB: usize = 16;

/// The right-hand matrix of one (image, group) of a convolution, read through the im2col map.
#[derive(Debug)]
pub(crate) struct Im2col<'a, S> {
    /// The vector unit, for the strided gathers.
    pub s: S,
    pub p: &'a Conv2d,
    /// The group's input channels of one image: `[c_in/g, h, w]`.
    pub src: &'a [f32],
}

impl<S: Lanes> PackB for Im2col<'_, S> {
    #[inline(always)]
    fn pack<const NR: usize>(&self, pc: usize, kc: usize, jc: usize, nc: usize, dst: &mut [f32]) {
        // An empty depth block (k = 0, e.g. a zero-sized kernel) has nothing to pack.
        if kc == 0 || nc == 0 {
            return;
        }
        let p = self.p;
        let [sh, sw] = p.stride;
        let [dh, dw] = p.dilation;
        let [pt, pl, _, _] = p.pad;
        let (ow, plane_len) = (p.out_w, p.h * p.w);
        debug_assert_eq!(dst.len(), packed_len(kc, nc));
        // The valid output rows / columns of each tap, once per panel (they cost divisions).
        let mut ys_tab: [Range<usize>; TAB] = core::array::from_fn(|_| 0..0);
        let mut xs_tab: [Range<usize>; TAB] = core::array::from_fn(|_| 0..0);
        for (ky, ys) in ys_tab.iter_mut().enumerate().take(p.kh) {
            *ys = valid_range(p.out_h, p.h, pt, ky * dh, sh);
        }
        for (kx, xs) in xs_tab.iter_mut().enumerate().take(p.kw) {
            *xs = valid_range(ow, p.w, pl, kx * dw, sw);
        }
        let ys_of = |ky: usize| {
            if ky < TAB {
                ys_tab[ky].clone()
            } else {
                valid_range(p.out_h, p.h, pt, ky * dh, sh)
            }
        };
        let xs_of = |kx: usize| {
            if kx < TAB {
                xs_tab[kx].clone()
            } else {
                valid_range(ow, p.w, pl, kx * dw, sw)
            }
        };
        // Output rows the panel touches: first..=last.
        let (oy_first, ox_first) = (jc / ow, jc % ow);
        let oy_last = (jc + nc - 1) / ow;
        let linear = sh == 1 && sw == 1 && ow == p.w;
        // `ROW_SLACK` floats past the panel's `nc` let a strided gather end with a whole
        // vector (see `gather_over`).
        let mut row_buf = [0.0f32; NC_MAX + ROW_SLACK];
        let row_all = &mut row_buf[..nc + ROW_SLACK];

        // The input rows the panel's output rows read, in channel `c` (a hint only: any
        // address is harmless).
        let in_row0 = (oy_first * sh).saturating_sub(pt);
        let in_rows = (oy_last - oy_first + 1) * sh + p.kh.saturating_sub(1) * dh;
        let prefetch_rows = |c: usize| {
            let first = c * plane_len + in_row0 * p.w;
            let span = (in_rows * p.w).min(plane_len);
            let base = self.src.as_ptr().wrapping_add(first);
            if first < self.src.len() {
                for l in (0..span).step_by(16) {
                    prefetch(base.wrapping_add(l));
                }
            }
        };

        // (ci, ky, kx) of row pc, then counted up.
        let taps = p.kh * p.kw;
        let (mut ci, tap) = (pc / taps, pc % taps);
        let (mut ky, mut kx) = (tap / p.kw, tap % p.kw);
        prefetch_rows(ci + 1);
        for pp in 0..kc {
            let plane = &self.src[ci * plane_len..][..plane_len];
            let ys = ys_of(ky);
            let xs = xs_of(kx);
            // Input index of output (oy, ox) is (oy*sh + ky*dh - pt) * w + ox*sw + kx*dw - pl.
            let row_off = (ky * dh) as isize - pt as isize;
            let col_off = (kx * dw) as isize - pl as isize;
            let off = row_off * p.w as isize + col_off;
            let start = jc as isize + off;
            if linear
                && ys.start <= oy_first
                && oy_last < ys.end
                && start >= 0
                && start as usize + nc <= plane_len
            {
                // One run of the plane; then the columns whose input is in the left or right
                // padding (they read a neighbouring row's edge) become zeros.
                scatter_row::<NR>(&plane[start as usize..][..nc], pp, kc, dst);
                if xs.start > 0 || xs.end < ow {
                    zero_columns::<NR>(dst, pp, kc, nc, ox_first, ow, &xs);
                }
            } else if linear {
                let row = &mut row_all[..nc];
                // The same run, but the panel reaches output rows whose input row is in the
                // top or bottom padding, or the run would start before or end after the plane
                // (those positions are padding columns): copy the part inside, zero the rest.
                let lo = (ys.start * ow).clamp(jc, jc + nc) - jc;
                let hi = (ys.end * ow).clamp(jc + lo, jc + nc) - jc;
                // Row position `d` reads plane index `start + d`; keep that inside the plane.
                let (lo_i, hi_i) = (lo as isize, hi as isize);
                let d_lo = (-start).clamp(lo_i, hi_i) as usize;
                let d_hi = (plane_len as isize - start).clamp(d_lo as isize, hi_i) as usize;
                let (src_lo, src_hi) = (
                    (start + d_lo as isize) as usize,
                    (start + d_hi as isize) as usize,
                );
                fill_zero(&mut row[..d_lo]);
                if d_hi > d_lo {
                    gather(self.s, &mut row[d_lo..d_hi], &plane[src_lo..src_hi], 1);
                }
                fill_zero(&mut row[d_hi..]);
                if xs.start > 0 || xs.end < ow {
                    zero_row_columns(row, ox_first, ow, &xs);
                }
                scatter_row::<NR>(row, pp, kc, dst);
            } else {
                let mut j = 0;
                let (mut oy, mut ox0) = (oy_first, ox_first);
                while j < nc {
                    let ox1 = ow.min(ox0 + nc - j);
                    let width = ox1 - ox0;
                    // Every write below may run past its part of the row, into parts
                    // written after it (or the slack), never into one already final.
                    if !ys.contains(&oy) || xs.is_empty() {
                        zero_over(self.s, &mut row_all[j..], width);
                    } else {
                        // Columns ox0..ox1 of this output row: zeros, the valid part, zeros.
                        let v0 = xs.start.clamp(ox0, ox1);
                        let v1 = xs.end.clamp(v0, ox1);
                        let (mid0, mid1) = (j + v0 - ox0, j + v1 - ox0);
                        zero_over(self.s, &mut row_all[j..], mid0 - j);
                        if mid1 > mid0 {
                            let iy = (oy * sh) as isize + row_off;
                            let ix = (v0 * sw) as isize + col_off;
                            let at = iy as usize * p.w + ix as usize;
                            gather_over(
                                self.s,
                                &mut row_all[mid0..],
                                mid1 - mid0,
                                &plane[at..],
                                sw,
                            );
                        }
                        zero_over(self.s, &mut row_all[mid1..], j + width - mid1);
                    }
                    j += width;
                    oy += 1;
                    ox0 = 0;
                }
                scatter_row::<NR>(&row_all[..nc], pp, kc, dst);
            }
            // Next (ci, ky, kx). On each new channel, start fetching the input rows the panel
            // will read from the channel after it.
            kx += 1;
            if kx == p.kw {
                kx = 0;
                ky += 1;
                if ky == p.kh {
                    ky = 0;
                    ci += 1;
                    prefetch_rows(ci + 1);
                }
            }
        }
    }
}

/// Zeros, in packed row `p`, the panel columns whose output column lies outside `xs` (the
/// panel starts at output column `ox_first` of its first row; rows are `ow` wide).
#[inline(always)]
fn zero_columns<const NR: usize>(
    dst: &mut [f32],
    p: usize,
    kc: usize,
    nc: usize,
    ox_first: usize,
    ow: usize,
    xs: &Range<usize>,
) {
    let l = PanelLayout::new::<NR>(nc);
    let mut set = |jj: usize| dst[l.at::<NR>(kc, p, jj)] = 0.0;
    // jj is the panel column of output column `ox` of the current output row.
    let mut row_start = 0isize - ox_first as isize;
    while row_start < nc as isize {
        for ox in (0..xs.start).chain(xs.end..ow) {
            let jj = row_start + ox as isize;
            if jj >= 0 && (jj as usize) < nc {
                set(jj as usize);
            }
        }
        row_start += ow as isize;
    }
}

/// Zeros the columns of a panel row (`row`, starting at output column `ox_first` of its
/// first output row; rows are `ow` wide) whose output column lies outside `xs`.
#[inline(always)]
fn zero_row_columns(row: &mut [f32], ox_first: usize, ow: usize, xs: &Range<usize>) {
    let mut row_start = 0isize - ox_first as isize;
    while row_start < row.len() as isize {
        for ox in (0..xs.start).chain(xs.end..ow) {
            let jj = row_start + ox as isize;
            if jj >= 0 && (jj as usize) < row.len() {
                row[jj as usize] = 0.0;
            }
        }
        row_start += ow as isize;
    }
}

/// Zeros a short slice without a library call.
#[inline(always)]
fn fill_zero(d: &mut [f32]) {
    for x in d {
        *x = 0.0;
    }
}

/// Floats a row buffer holds past its columns for [`gather_over`] and [`zero_over`]: the
/// widest vector.
const ROW_SLACK: usize = 16;

/// Zeros `dst[..len]` in whole vectors, so `dst[len..]` (at least [`ROW_SLACK`] floats of
/// it) may be overwritten too. The runs are short (a row's padding columns, mostly one or
/// none): a plain loop became a `memset` call per run, which cost more than the zeros.
#[inline(always)]
fn zero_over<S: Lanes>(s: S, dst: &mut [f32], len: usize) {
    const { assert!(S::N <= ROW_SLACK) };
    if len == 0 {
        return;
    }
    // A real check: the stores below go through a raw pointer.
    assert!(dst.len() + 1 >= len + S::N);
    let mut i = 0;
    while i < len {
        // SAFETY: `i < len`, so `dst[i..i + N]` is in bounds (checked above).
        unsafe { s.store(dst.as_mut_ptr().add(i), s.zero()) };
        i += S::N;
    }
}

/// `dst[i] = src[i * stride]` for `i < len`, where `dst[len..]` (at least [`ROW_SLACK`]
/// floats of it) may be overwritten with anything: a stride-2 gather ends with a whole, masked
/// vector instead of up to `N - 1` scalar copies (the 28-, 14- and 7-wide output rows of
/// ResNet-50's strided convolutions are mostly that end).
#[inline(always)]
fn gather_over<S: Lanes>(s: S, dst: &mut [f32], len: usize, src: &[f32], stride: usize) {
    if stride != 2 || len == 0 {
        gather(s, &mut dst[..len], src, stride);
        return;
    }
    const { assert!(S::N <= ROW_SLACK) };
    let n = S::N;
    // Real checks: the vector stores and loads below go through raw pointers.
    assert!(dst.len() + 1 >= len + n && src.len() > 2 * (len - 1));
    let mut i = 0;
    while i + n <= len && 2 * (i + n) <= src.len() {
        // SAFETY: `dst[i..i + N]` and `src[2i..2i + 2N]` are in bounds (the loop condition).
        unsafe {
            s.store(
                dst.as_mut_ptr().add(i),
                s.load_even(src.as_ptr().add(2 * i)),
            )
        };
        i += n;
    }
    while i < len {
        let r = (len - i).min(n);
        // SAFETY: `src[2i..2i + 2r - 1]` is in bounds (`2 (len - 1) < src.len()`, checked
        // above), and so is `dst[i..i + N]` (`i < len` and `len - 1 + N <= dst.len()`).
        unsafe {
            s.store(
                dst.as_mut_ptr().add(i),
                s.load_even_first(src.as_ptr().add(2 * i), r),
            )
        };
        i += r;
    }
}

/// `dst[i] = src[i * stride]`, without a library call for short runs.
#[inline(always)]
fn gather<S: Lanes>(s: S, dst: &mut [f32], src: &[f32], stride: usize) {
    match stride {
        1 => {
            let src = &src[..dst.len()];
            let mut d = dst.chunks_exact_mut(8);
            let mut s = src.chunks_exact(8);
            for (d, s) in (&mut d).zip(&mut s) {
                d.copy_from_slice(s);
            }
            for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
                *d = s;
            }
        }
        2 => {
            // Whole vectors while `2N` source floats remain (a vector load reads the odd
            // one after the last even one it keeps), then one by one.
            let n = S::N;
            let mut i = 0;
            while i + n <= dst.len() && 2 * (i + n) <= src.len() {
                // SAFETY: `dst[i..i + N]` and `src[2i..2i + 2N]` are in bounds (the loop
                // condition).
                unsafe {
                    s.store(
                        dst.as_mut_ptr().add(i),
                        s.load_even(src.as_ptr().add(2 * i)),
                    )
                };
                i += n;
            }
            for (j, x) in dst.iter_mut().enumerate().skip(i) {
                *x = src[2 * j];
            }
        }
        _ => {
            for (d, &s) in dst.iter_mut().zip(src.iter().step_by(stride)) {
                *d = s;
            }
        }
    }
}
