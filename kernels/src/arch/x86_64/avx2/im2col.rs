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
//!
//! A stride-2 convolution is the second case's worst: on a 28x28 input each panel row is
//! fourteen 14-wide gathers into a row buffer, and each vector the scatter then reads from
//! that buffer spans two or three of those stores, which the CPU cannot forward (the packer
//! took 27 % of Inception-v2's 96 -> 96 3x3 stride-2 layer, AMD EPYC Zen 4). So when its
//! output is as large as a phase of its input, [`conv2d_gemm`] first splits each input
//! channel into its four phases (one pass, into the scratch), on which every tap is a
//! stride-1 tap of a plane whose rows are as wide as the output's: the first case again.

use core::ops::Range;

use super::blis::{
    self, packed_len, prefetch_run, scatter_row, Bias, MicroKernel, PackB, PanelLayout, RowMajor,
    NC_MAX,
};
use super::lanes::Lanes;
use crate::arch::x86_64::simd::vector::array;
use crate::par::{worth_splitting, Parallel, SharedMut};
use crate::{Activation, Conv2d};

/// The convolution on micro-kernel `K`, for the non-depthwise branches; `res`, a residual
/// operand laid out as `out`, is added in the GEMM's epilogue. Per (image, group) the GEMM's
/// right-hand matrix is the input itself for a pointwise convolution, the input's phases for
/// a stride-2 one whose output is as large as a phase ([`Phases`], split into `scratch`, the
/// caller's [`Conv2d::scratch_len`] floats, when they fit), else the implicit im2col matrix.
/// The phases give the same products in the same order as the im2col packer, so the output
/// does not depend on how large `scratch` is.
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
    scratch: &mut [f32],
    out: &mut [f32],
) {
    let cig = p.c_in / p.groups;
    let cog = p.c_out / p.groups;
    let in_plane = p.h * p.w;
    let out_plane = p.out_h * p.out_w;
    if out_plane == 0 || cog == 0 {
        return;
    }
    let phases = Phases::new(p, scratch.len());
    for n in 0..p.batch {
        for g in 0..p.groups {
            let src = &input[(n * p.c_in + g * cig) * in_plane..][..cig * in_plane];
            let gemm = group_gemm(p, n, g, weight, bias, res, act, out);
            if p.is_pointwise() {
                let b = RowMajor {
                    data: src,
                    ld: in_plane,
                    in_place: true,
                };
                // SAFETY: the caller guarantees the CPU features.
                unsafe { run::<K, NR, _>(par, gemm, &b) };
            } else if let Some(ph) = phases {
                let work = cog * out_plane * cig * p.kh * p.kw;
                let data = ph.split_par(s, par, p, src, work, scratch);
                if p.kh == 1 && p.kw == 1 && p.pad[0] == 0 && p.pad[1] == 0 {
                    // A 1x1 window without padding reads phase (0, 0) as a pointwise
                    // convolution reads its input: `cig` planes of `out_plane` floats.
                    let b = RowMajor {
                        data,
                        ld: out_plane,
                        in_place: true,
                    };
                    // SAFETY: the caller guarantees the CPU features.
                    unsafe { run::<K, NR, _>(par, gemm, &b) };
                } else {
                    // SAFETY: the caller guarantees the CPU features.
                    unsafe { run::<K, NR, _>(par, gemm, &Phased { s, p, ph, data }) };
                }
            } else {
                // SAFETY: the caller guarantees the CPU features.
                unsafe { run::<K, NR, _>(par, gemm, &Im2col { s, p, src }) };
            }
        }
    }
}

/// The GEMM of image `n`, group `g` of `p`: the group's weights (in the blocked layout) times
/// a right-hand matrix the caller gives, into the group's output planes, with its part of the
/// bias and of the residual.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the image and the group.
fn group_gemm<'a>(
    p: &Conv2d,
    n: usize,
    g: usize,
    weight: &'a [f32],
    bias: Option<&'a [f32]>,
    res: Option<&'a [f32]>,
    act: Activation,
    out: &'a mut [f32],
) -> blis::Gemm<'a> {
    let cog = p.c_out / p.groups;
    let out_plane = p.out_h * p.out_w;
    let k = p.c_in / p.groups * p.kh * p.kw;
    let at = (n * p.c_out + g * cog) * out_plane;
    blis::Gemm {
        m: cog,
        n: out_plane,
        k,
        a: &weight[g * cog * k..][..cog * k],
        lda: k,
        a_blocked: true,
        c: &mut out[at..][..cog * out_plane],
        ldc: out_plane,
        bias: bias.map_or(Bias::None, |b| Bias::Row(&b[g * cog..][..cog])),
        res: res.map(|r| &r[at..][..cog * out_plane]),
        act,
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
        let mut ys_tab: [Range<usize>; TAB] = array(|_| 0..0);
        let mut xs_tab: [Range<usize>; TAB] = array(|_| 0..0);
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
                prefetch_run(base, span);
            }
        };

        let run = Run {
            jc,
            nc,
            ow,
            oy_first,
            oy_last,
            ox_first,
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
            if linear {
                linear_row::<S, NR>(self.s, plane, off, &ys, &xs, &run, pp, kc, dst, row_all);
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

/// A stride-2 convolution's input split into its phases, for [`conv2d_gemm`]: phase
/// `(py, px)` of an input channel is the plane of its elements at rows `2r + py` and columns
/// `2c + px`, `hp x wp` (`ceil(h / 2) x ceil(w / 2)`, zeros where a phase has one row or
/// column fewer). Tap `(ky, kx)` of output `(oy, ox)` reads input row `2 oy + ky - pt`, that
/// is phase row `oy + dy` of phase `py`, with `ky - pt = 2 dy + py`; so on its phase plane
/// every tap is a stride-1 tap, and when the output is `hp x wp` as well (a 3x3 window with
/// padding 1, a 1x1 without padding, ResNet's 7x7 stem) an output row is as wide as a phase
/// row and a panel row of `B` is one run of a phase plane ([`linear_row`]), where on the
/// input it is a stride-2 gather per output row.
#[derive(Clone, Copy, Debug)]
struct Phases {
    hp: usize,
    wp: usize,
    /// Row phases the window reads (`[py = 0, py = 1]`) and column phases.
    rows: [bool; 2],
    cols: [bool; 2],
    /// Floats of one image's (group's) phases: `c_in / groups` times the phases read.
    len: usize,
}

impl Phases {
    /// The phases of `p`, or `None` if it is not a stride-2 convolution whose output is as
    /// large as a phase, or the scratch (`scratch` floats) cannot hold them.
    fn new(p: &Conv2d, scratch: usize) -> Option<Phases> {
        let (hp, wp) = (p.h.div_ceil(2), p.w.div_ceil(2));
        if p.stride != [2, 2]
            || p.dilation != [1, 1]
            || p.out_h != hp
            || p.out_w != wp
            || hp == 0
            || wp == 0
            || p.kh == 0
            || p.kw == 0
        {
            return None;
        }
        let parity = |k: usize, pad: usize| {
            let mut used = [false; 2];
            for t in 0..k {
                used[(t as isize - pad as isize).rem_euclid(2) as usize] = true;
            }
            used
        };
        let (rows, cols) = (parity(p.kh, p.pad[0]), parity(p.kw, p.pad[1]));
        let len = (p.c_in / p.groups)
            .checked_mul(count(rows) * count(cols))?
            .checked_mul(hp.checked_mul(wp)?)?;
        (len <= scratch).then_some(Phases {
            hp,
            wp,
            rows,
            cols,
            len,
        })
    }

    #[inline(always)]
    fn plane(&self) -> usize {
        self.hp * self.wp
    }

    /// The phases a channel stores, in order.
    #[inline(always)]
    fn slots(&self) -> usize {
        count(self.rows) * count(self.cols)
    }

    /// Where phase `(py, px)` (one the window reads) lies among a channel's phases.
    #[inline(always)]
    fn slot(&self, py: usize, px: usize) -> usize {
        let nx = count(self.cols);
        let iy = usize::from(py == 1 && self.rows[0]);
        let ix = usize::from(px == 1 && self.cols[0]);
        iy * nx + ix
    }

    /// Writes the phases of all of `src`'s channels into the front of `scratch`, by runs of
    /// channels on the threads a GEMM of `work` multiply-adds will use, and returns them.
    #[inline(always)]
    fn split_par<'s, S: Lanes + Sync>(
        &self,
        s: S,
        par: &dyn Parallel,
        p: &Conv2d,
        src: &[f32],
        work: usize,
        scratch: &'s mut [f32],
    ) -> &'s [f32] {
        let cig = p.c_in / p.groups;
        let per = self.slots() * self.plane();
        let tasks = if worth_splitting(par, work) {
            cig.min(4 * par.threads())
        } else {
            1
        };
        let phases = SharedMut::new(&mut scratch[..self.len]);
        par.run(tasks, &|t| {
            let chans = cig * t / tasks..cig * (t + 1) / tasks;
            // SAFETY: task `t` writes only its channels' phases, and `Parallel` runs each
            // task once.
            let dst = unsafe { phases.part(chans.start * per, chans.len() * per) };
            s.with_features(|s| self.split(s, p, src, chans, dst));
        });
        &scratch[..self.len]
    }

    /// Writes the phases of input channels `chans` of `src` (`c_in / groups` planes of
    /// `h x w`) into `dst`, which holds exactly theirs. Inlined into the `#[target_feature]`
    /// trampoline of [`Lanes::with_features`] ([`Phases::split_par`]'s tasks are closures,
    /// which have no features of their own).
    #[inline(always)]
    fn split<S: Lanes>(&self, s: S, p: &Conv2d, src: &[f32], chans: Range<usize>, dst: &mut [f32]) {
        let (h, w, plane) = (p.h, p.w, self.plane());
        let total = dst.len();
        for (i, ci) in chans.enumerate() {
            let input = &src[ci * h * w..][..h * w];
            for py in (0..2).filter(|&py| self.rows[py]) {
                for px in (0..2).filter(|&px| self.cols[px]) {
                    let base = (i * self.slots() + self.slot(py, px)) * plane;
                    // Phase columns that exist: `2c + px < w`.
                    let valid = (w - px.min(w)).div_ceil(2);
                    for r in 0..self.hp {
                        let at = base + r * self.wp;
                        let iy = 2 * r + py;
                        if iy >= h || valid == 0 {
                            fill_zero(&mut dst[at..at + self.wp]);
                            continue;
                        }
                        let row = &input[iy * w + px..];
                        // A whole last vector where the rows after this one (rewritten
                        // later, by this call) leave room for it.
                        if total - at >= valid + ROW_SLACK {
                            gather_over(s, &mut dst[at..], valid, row, 2);
                        } else {
                            gather(s, &mut dst[at..at + valid], row, 2);
                        }
                        fill_zero(&mut dst[at + valid..at + self.wp]);
                    }
                }
            }
        }
    }
}

/// How many of the two parities `used` marks.
#[inline(always)]
fn count(used: [bool; 2]) -> usize {
    usize::from(used[0]) + usize::from(used[1])
}

/// The right-hand matrix of one (image, group) of a stride-2 convolution, read through the
/// im2col map from the input's phases ([`Phases`]).
struct Phased<'a, S> {
    s: S,
    p: &'a Conv2d,
    ph: Phases,
    /// The phases of the group's input channels ([`Phases::split`]).
    data: &'a [f32],
}

impl<S: Lanes> PackB for Phased<'_, S> {
    #[inline(always)]
    fn pack<const NR: usize>(&self, pc: usize, kc: usize, jc: usize, nc: usize, dst: &mut [f32]) {
        if kc == 0 || nc == 0 {
            return;
        }
        let (p, ph) = (self.p, &self.ph);
        let (ow, plane_len) = (p.out_w, ph.plane());
        debug_assert_eq!(dst.len(), packed_len(kc, nc));
        let mut row_buf = [0.0f32; NC_MAX + ROW_SLACK];
        let row_all = &mut row_buf[..nc + ROW_SLACK];
        let run = Run {
            jc,
            nc,
            ow,
            oy_first: jc / ow,
            oy_last: (jc + nc - 1) / ow,
            ox_first: jc % ow,
        };
        // Tap `k` (padding `pad`, `n` phase rows or columns) reads phase `k - pad mod 2` at
        // offset `d = floor((k - pad) / 2)`; the outputs `o` with `0 <= o + d < n`.
        let tap = |k: usize, pad: usize, n: usize, out: usize| {
            let t = k as isize - pad as isize;
            let d = t.div_euclid(2);
            let lo = (-d).clamp(0, out as isize) as usize;
            let hi = (n as isize - d).clamp(lo as isize, out as isize) as usize;
            (t.rem_euclid(2) as usize, d, lo..hi)
        };
        let taps = p.kh * p.kw;
        for pp in 0..kc {
            let (ci, t) = ((pc + pp) / taps, (pc + pp) % taps);
            let (py, dy, ys) = tap(t / p.kw, p.pad[0], ph.hp, p.out_h);
            let (px, dx, xs) = tap(t % p.kw, p.pad[1], ph.wp, ow);
            let at = (ci * ph.slots() + ph.slot(py, px)) * plane_len;
            let plane = &self.data[at..][..plane_len];
            let off = dy * ph.wp as isize + dx;
            linear_row::<S, NR>(self.s, plane, off, &ys, &xs, &run, pp, kc, dst, row_all);
        }
    }
}

/// Where a panel lies among the output positions: columns `jc..jc + nc` of `B`, output rows
/// `oy_first..=oy_last` of `ow` columns each, the first starting at column `ox_first`.
#[derive(Clone, Copy, Debug)]
struct Run {
    jc: usize,
    nc: usize,
    ow: usize,
    oy_first: usize,
    oy_last: usize,
    ox_first: usize,
}

/// Packed row `pp` of a panel whose tap reads `plane[j + off]` for output position `j`
/// (`oy * ow + ox`), zero where the output row is outside `ys` or the column outside `xs`:
/// the tap of a stride-1 convolution whose output rows are as wide as the plane's rows (or
/// of a stride-2 one on a phase plane of the input, [`Phases`]). Inside the plane it is one
/// run, written straight into the packed layout, and the columns whose input is in the left
/// or right padding (they read a neighbouring row's edge) become zeros.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // one panel row's geometry; called per row of `k`.
fn linear_row<S: Lanes, const NR: usize>(
    s: S,
    plane: &[f32],
    off: isize,
    ys: &Range<usize>,
    xs: &Range<usize>,
    g: &Run,
    pp: usize,
    kc: usize,
    dst: &mut [f32],
    row_all: &mut [f32],
) {
    let Run {
        jc,
        nc,
        ow,
        oy_first,
        oy_last,
        ox_first,
    } = *g;
    let plane_len = plane.len();
    let start = jc as isize + off;
    if ys.start <= oy_first && oy_last < ys.end && start >= 0 && start as usize + nc <= plane_len {
        scatter_row::<NR>(&plane[start as usize..][..nc], pp, kc, dst);
        if xs.start > 0 || xs.end < ow {
            zero_columns::<NR>(dst, pp, kc, nc, ox_first, ow, xs);
        }
    } else {
        let row = &mut row_all[..nc];
        // The same run, but the panel reaches output rows whose input row is in the top or
        // bottom padding, or the run would start before or end after the plane (those
        // positions are padding columns): copy the part inside, zero the rest.
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
            gather(s, &mut row[d_lo..d_hi], &plane[src_lo..src_hi], 1);
        }
        fill_zero(&mut row[d_hi..]);
        if xs.start > 0 || xs.end < ow {
            zero_row_columns(row, ox_first, ow, xs);
        }
        scatter_row::<NR>(row, pp, kc, dst);
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
