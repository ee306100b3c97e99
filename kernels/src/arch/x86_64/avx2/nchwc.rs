//! The blocked (NCHW16c) convolution for AVX2 and AVX-512, one body generic over [`Lanes`]:
//! a direct convolution, no im2col and no packing (see [`crate::nchwc`] for the layout).
//!
//! ```text
//! for each group of G output blocks (G * 16 channels):
//!     for each pass over input blocks whose weights fit a quarter of the L2:
//!         for each class of output pixels whose taps inside the image are the same
//!         (the interior, each edge, each corner), P pixels at a time, across rows:
//!             acc[v][q] = first pass ? 0 : out            // V = G * 16 / N vectors x P pixels
//!             for each input block of the pass, tap (ky, kx) of the class, channel i:
//!                 w[v] = weights[group][block][ky][kx][i][v]  // V loads, one run of G * 64 bytes
//!                 for q in 0..P:
//!                     x = broadcast input[block][pixel q's input + tap][i]
//!                     acc[v][q] += w[v] * x               // V FMAs per broadcast
//!             out = last pass ? act(acc + bias + residual) : acc
//! ```
//!
//! Why classes and passes. Each step reads all of the pass's weights for its P pixels, so a
//! layer's weights are read once per step and must come from L2, and steps should be as long
//! as the map allows. Row by row, ResNet-50's 512 -> 512 3x3 on 7x7 (1.2 MB of weights per
//! group) took three steps per row (a border pixel, five, a border pixel) and read its weights
//! 21 times from L3. Classes run each set of pixels with the same taps across rows (the 25
//! interior pixels of a 7x7 map are five steps; a pointwise convolution's plane is one class),
//! and passes keep the weights a step reads in a quarter of the L2, at the cost of storing and
//! reloading the accumulators once per pass. Maps of 7x7 are still this kernel's weak case
//! (docs/performance.md, "A blocked channel layout").
//!
//! AVX-512 takes V = 4 (four blocks, 64 channels) by P = 6 pixels: 24 accumulators, four
//! weight vectors and the broadcast in the 32 registers, and 10 loads per 24 FMAs (MLAS's
//! AVX-512 NCHWc kernel has the same shape). AVX2 takes V = 2 (one block) by P = 6: 12
//! accumulators, two weights and the broadcast in its 16.
//!
//! The body also takes P = 12 (with V = 2 on AVX-512), which reads each weight half as often,
//! what small maps need; on ResNet-50's 14x14 and 7x7 layers it measured no faster: twelve
//! input pointers do not fit the general registers beside the loop's others, and three of them
//! were reloaded from the stack every channel.

use core::ops::Range;

use super::lanes::{act_vec, scalar_act, Lanes};
use crate::nchwc::{blocks, check, BLOCK, GROUP};
use crate::{Activation, Conv2d};

/// What every step of one convolution shares.
struct Geometry<'a> {
    p: &'a Conv2d,
    /// Input and output blocks.
    ibs: usize,
    obs: usize,
    /// Floats per block of the input and of the output (one plane of 16-channel pixels).
    plane_in: usize,
    plane_out: usize,
    /// Floats of packed weights per output block, and per tap and output block.
    w_block: usize,
    w_tap: usize,
    bias: Option<&'a [f32]>,
    act: Activation,
    /// The output rows computed (all of them, or one task's share).
    rows: Range<usize>,
}

/// The packed weights of the blocks a call computes (`nchwc::pack_weights`): channel `i` of
/// input block `ib` at tap `(ky, kx)` at `w + (((ib * kh + ky) * kw + kx) * 16 + i) * row`,
/// the call's first output channel there.
#[derive(Clone, Copy)]
struct Weights {
    w: *const f32,
    /// Floats per input channel and tap: 16 times the blocks of the weights' group.
    row: usize,
}

/// Input blocks `ib..ib_end` of one pass; whether it is the first and the last.
#[derive(Clone, Copy)]
struct Pass {
    ib: usize,
    ib_end: usize,
    first: bool,
    last: bool,
}

/// The blocked convolution with `V` vectors (of `S::N` lanes) of output channels by `P`
/// pixels (6 or 12) per step; `V1` vectors are one block (a group's blocks that do not fill
/// `V` go one at a time).
///
/// # Safety
///
/// The token's features are available (it exists); `V * S::N` is a multiple of [`BLOCK`] and
/// `V1 * S::N == BLOCK`.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // The table entry's contract.
pub(crate) unsafe fn conv2d<S: Lanes, const V: usize, const V1: usize, const P: usize>(
    s: S,
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    check(p, input, weight, bias, residual, out);
    let r = residual.map_or(core::ptr::null(), |r| r.as_ptr());
    // SAFETY: `check` sized every operand for `p`; the whole output is this call's.
    unsafe {
        conv2d_part::<S, V, V1, P>(
            s,
            p,
            input.as_ptr(),
            weight.as_ptr(),
            bias,
            r,
            act,
            out.as_mut_ptr(),
            0..p.batch,
            0..p.out_h,
        )
    }
}

/// [`conv2d`] of images `images` and output rows `rows` (every output block's), through the
/// operands' pointers: one thread's share of a convolution split by rows.
///
/// # Safety
///
/// As for [`conv2d`], with the operands `check`ed for `p` (`r` null without a residual), and
/// nothing else reading or writing those rows of those images' output while this runs.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn conv2d_part<S: Lanes, const V: usize, const V1: usize, const P: usize>(
    s: S,
    p: &Conv2d,
    x: *const f32,
    w: *const f32,
    bias: Option<&[f32]>,
    r: *const f32,
    act: Activation,
    y: *mut f32,
    images: Range<usize>,
    rows: Range<usize>,
) {
    debug_assert!(V1 * S::N == BLOCK && (V * S::N).is_multiple_of(BLOCK));
    let g = Geometry {
        p,
        ibs: blocks(p.c_in),
        obs: blocks(p.c_out),
        plane_in: p.h * p.w * BLOCK,
        plane_out: p.out_h * p.out_w * BLOCK,
        w_block: blocks(p.c_in) * p.kh * p.kw * BLOCK * BLOCK,
        w_tap: p.kh * p.kw * BLOCK * BLOCK,
        bias,
        act,
        rows,
    };
    let group = V * S::N / BLOCK;
    debug_assert!(group <= GROUP && (P == 6 || P == 12));
    // Input blocks per pass: a group's weights for them in a quarter of the L2.
    let per_pass = (crate::arch::x86_64::cache::l2_bytes() / 4 / (g.w_tap * GROUP * 4)).max(1);
    for n in images {
        // One group of the packed weights at a time: `blocks` output blocks from `ob`.
        let mut ob = 0;
        while ob < g.obs {
            let blocks = GROUP.min(g.obs - ob);
            // At least one pass, so that without input channels the output still gets its
            // bias, residual and activation.
            let mut ib = 0;
            loop {
                let ib_end = (ib + per_pass).min(g.ibs);
                let pass = Pass {
                    ib,
                    ib_end,
                    first: ib == 0,
                    last: ib_end == g.ibs,
                };
                // SAFETY: the operands are sized for `p` (caller); image `n` and output blocks
                // `ob..ob + blocks` are inside them.
                unsafe {
                    let x = x.add(n * g.ibs * g.plane_in);
                    let at = (n * g.obs + ob) * g.plane_out;
                    let (r, y) = (if r.is_null() { r } else { r.add(at) }, y.add(at));
                    let w = w.add(ob * g.w_block);
                    let row = blocks * BLOCK;
                    // `group` blocks at a time while there are that many, then one at a time.
                    let mut b = 0;
                    while b < blocks {
                        let r = if r.is_null() {
                            r
                        } else {
                            r.add(b * g.plane_out)
                        };
                        let (w, y) = (
                            Weights {
                                w: w.add(b * BLOCK),
                                row,
                            },
                            y.add(b * g.plane_out),
                        );
                        if b + group <= blocks {
                            classes::<S, V, P>(s, &g, pass, ob + b, x, w, r, y);
                            b += group;
                        } else {
                            classes::<S, V1, P>(s, &g, pass, ob + b, x, w, r, y);
                            b += 1;
                        }
                    }
                }
                ib = ib_end;
                if ib >= g.ibs {
                    break;
                }
            }
            ob += blocks;
        }
    }
}

/// The output positions `out` along one axis (input size `size`, kernel `k`, stride `st`,
/// padding before `pad`) cut into runs whose taps inside the input are the same: yields
/// `(first, end, k0, k1)` for each run `first..end` with taps `k0..k1`. (An iterator, not a
/// function taking a closure: a closure is not compiled with the features of the
/// `#[target_feature]` function it is written in, and its intrinsics would become calls.)
struct Runs {
    next: usize,
    out: usize,
    size: isize,
    k: isize,
    st: usize,
    pad: isize,
}

impl Runs {
    fn new(out: Range<usize>, size: usize, k: usize, st: usize, pad: usize) -> Runs {
        Runs {
            next: out.start,
            out: out.end,
            size: size as isize,
            k: k as isize,
            st,
            pad: pad as isize,
        }
    }

    /// The taps of output position `o` that fall inside the input.
    #[inline(always)]
    fn taps(&self, o: usize) -> (usize, usize) {
        let i = (o * self.st) as isize - self.pad;
        (
            (-i).clamp(0, self.k) as usize,
            (self.size - i).clamp(0, self.k) as usize,
        )
    }
}

impl Iterator for Runs {
    type Item = (usize, usize, usize, usize);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        let first = self.next;
        if first >= self.out {
            return None;
        }
        let t = self.taps(first);
        let mut end = first + 1;
        while end < self.out && self.taps(end) == t {
            end += 1;
        }
        self.next = end;
        Some((first, end, t.0, t.1))
    }
}

/// Every output pixel of the `V * N / 16` output blocks from `ob` for one pass (weights of
/// the group at `w`, output and residual at `y` and `r`, the residual null if none), for one
/// image (input at `x`): class by class, `P` pixels at a time.
///
/// # Safety
///
/// As for [`conv2d`], with the pointers inside its checked operands.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn classes<S: Lanes, const V: usize, const P: usize>(
    s: S,
    g: &Geometry<'_>,
    pass: Pass,
    ob: usize,
    x: *const f32,
    w: Weights,
    r: *const f32,
    y: *mut f32,
) {
    let p = g.p;
    let [sy, sx] = p.stride;
    for (y0, y1, ky0, ky1) in Runs::new(g.rows.clone(), p.h, p.kh, sy, p.pad[0]) {
        for (x0, x1, kx0, kx1) in Runs::new(0..p.out_w, p.w, p.kw, sx, p.pad[1]) {
            // A class with no tap inside the image (padding wider than the kernel) sums
            // nothing: its pixels get the bias and residual alone.
            let cols = x1 - x0;
            let count = (y1 - y0) * cols;
            // Pixel `i` of the class: its input offset at tap (0, 0) (negative before the
            // image's start, for border pixels) and its output offset.
            let at = |i: usize| {
                let (oy, ox) = (y0 + i / cols, x0 + i % cols);
                let iy = (oy * sy) as isize - p.pad[0] as isize;
                let ix = (ox * sx) as isize - p.pad[1] as isize;
                (
                    (iy * p.w as isize + ix) * BLOCK as isize,
                    (oy * p.out_w + ox) * BLOCK,
                )
            };
            let taps = ((ky0, ky1), (kx0, kx1));
            // `Q` pixels from pixel `i` of the class.
            macro_rules! step {
                ($q:literal, $i:expr) => {{
                    let px = core::array::from_fn(|q| at($i + q));
                    // SAFETY: the pixels are inside the output, and the class's taps inside
                    // the image for each of them.
                    unsafe { pixels::<S, V, $q>(s, g, pass, ob, x, w, r, y, taps, px) }
                }};
            }
            let mut i = 0;
            while i + P <= count {
                match P {
                    12 => step!(12, i),
                    _ => step!(6, i),
                }
                i += P;
            }
            // The ragged end of the class.
            match count - i {
                11 => step!(11, i),
                10 => step!(10, i),
                9 => step!(9, i),
                8 => step!(8, i),
                7 => step!(7, i),
                6 => step!(6, i),
                5 => step!(5, i),
                4 => step!(4, i),
                3 => step!(3, i),
                2 => step!(2, i),
                1 => step!(1, i),
                _ => {}
            }
        }
    }
}

/// `Q` output pixels (`px[q]`: the input offset at tap (0, 0), possibly negative, and the
/// output offset within a block) of the `V * N / 16` blocks from `ob`, summing the pass's
/// input blocks over taps `taps.0` by `taps.1` (inside the image for every one of the
/// pixels).
///
/// # Safety
///
/// As for [`classes`], and the taps and pixels as above.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pixels<S: Lanes, const V: usize, const Q: usize>(
    s: S,
    g: &Geometry<'_>,
    pass: Pass,
    ob: usize,
    x: *const f32,
    w: Weights,
    r: *const f32,
    y: *mut f32,
    taps: ((usize, usize), (usize, usize)),
    px: [(isize, usize); Q],
) {
    let p = g.p;
    let n = S::N;
    // Vector `v` of a pixel: block `v / per`, lanes `(v % per) * N..`; `per` vectors a block.
    let per = BLOCK / n;
    let o_off = |v: usize| (v / per) * g.plane_out + (v % per) * n;
    let mut acc = [[s.zero(); Q]; V];
    if !pass.first {
        for (v, acc) in acc.iter_mut().enumerate() {
            for (q, a) in acc.iter_mut().enumerate() {
                // SAFETY: the caller's pixel, inside the output; the earlier pass stored it.
                *a = unsafe { s.load(y.add(o_off(v) + px[q].1)) };
            }
        }
    }
    let ((ky0, ky1), (kx0, kx1)) = taps;
    for ib in pass.ib..pass.ib_end {
        for ky in ky0..ky1 {
            for kx in kx0..kx1 {
                let tap = (ib * g.plane_in + (ky * p.w + kx) * BLOCK) as isize;
                // SAFETY: the tap is inside the image for each of the `Q` pixels (caller), so
                // every input offset is in block `ib` of this image; the weight run of tap
                // `(ib, ky, kx)` is inside the group's weights.
                unsafe {
                    let xp: [*const f32; Q] = core::array::from_fn(|q| x.offset(px[q].0 + tap));
                    // Channel 0 of input block `ib` at tap `(ky, kx)`; channel `i` is row `i`.
                    let t = (ib * p.kh + ky) * p.kw + kx;
                    let wp = w.w.add(t * BLOCK * w.row);
                    for i in 0..BLOCK {
                        let mut wv = [s.zero(); V];
                        for (v, wv) in wv.iter_mut().enumerate() {
                            *wv = s.load(wp.add(i * w.row + v * n));
                        }
                        for q in 0..Q {
                            let xb = s.broadcast(xp[q].add(i));
                            for v in 0..V {
                                acc[v][q] = s.fma(wv[v], xb, acc[v][q]);
                            }
                        }
                    }
                }
            }
        }
    }
    for (v, acc) in acc.iter().enumerate() {
        if !pass.last {
            for (q, &a) in acc.iter().enumerate() {
                // SAFETY: the caller's pixel, inside the output.
                unsafe { s.store(y.add(o_off(v) + px[q].1), a) };
            }
            continue;
        }
        // The bias of this vector's lanes; past `c_out` (the last block's padding) zero.
        let ch = (ob + v / per) * BLOCK + (v % per) * n;
        let b = match g.bias {
            // SAFETY: `check` made the bias at least `c_out` long; lanes from `ch` up to
            // `c_out` are read.
            Some(b) if ch + n <= p.c_out => unsafe { s.load(b.as_ptr().add(ch)) },
            // SAFETY: as above, the lanes up to `c_out`, the others not touched.
            Some(b) if ch < p.c_out => unsafe { s.load_first(b.as_ptr().add(ch), p.c_out - ch) },
            _ => s.zero(),
        };
        for (q, &a) in acc.iter().enumerate() {
            let off = o_off(v) + px[q].1;
            let mut a = s.add(a, b);
            // SAFETY: the caller's pixel, inside the output and the residual (same layout),
            // checked by `check`.
            unsafe {
                if !r.is_null() {
                    a = s.add(a, s.load(r.add(off)));
                }
                s.store(y.add(off), act_vec(s, a, g.act));
                if scalar_act(g.act) {
                    for l in 0..n {
                        let e = y.add(off + l);
                        *e = g.act.apply(*e);
                    }
                }
            }
        }
    }
}

/// Defines the table entry `conv2d_nchwc` of an ISA: [`conv2d`] with the token `$s` (of
/// features `$feat`) and its `V`, `V1` and `P`.
macro_rules! nchwc_entry {
    ($s:ty, $feat:literal, $v:literal, $v1:literal, $p:literal) => {
        /// The table's `conv2d_nchwc` for this ISA.
        fn conv2d_nchwc(
            p: &crate::Conv2d,
            input: &[f32],
            weight: &[f32],
            bias: Option<&[f32]>,
            residual: Option<&[f32]>,
            act: crate::Activation,
            out: &mut [f32],
        ) {
            #[target_feature(enable = $feat)]
            unsafe fn run(
                p: &crate::Conv2d,
                input: &[f32],
                weight: &[f32],
                bias: Option<&[f32]>,
                residual: Option<&[f32]>,
                act: crate::Activation,
                out: &mut [f32],
            ) {
                // SAFETY: the features are enabled here, and `$v1` vectors are one block.
                unsafe {
                    let s = <$s>::new();
                    crate::arch::x86_64::avx2::nchwc::conv2d::<$s, $v, $v1, $p>(
                        s, p, input, weight, bias, residual, act, out,
                    )
                }
            }
            // SAFETY: only reachable through a table built after detecting the features
            // (crate::table).
            unsafe { run(p, input, weight, bias, residual, act, out) }
        }

        /// The table's threaded `conv2d_nchwc`: each task one image's share of the output
        /// rows, every output block of them (so each task reads all the weights; the rows of
        /// one image go to at most twice as many tasks as there are threads).
        #[allow(clippy::too_many_arguments)] // conv2d_nchwc's contract plus the threads.
        fn conv2d_nchwc_par(
            par: &dyn crate::par::Parallel,
            p: &crate::Conv2d,
            input: &[f32],
            weight: &[f32],
            bias: Option<&[f32]>,
            residual: Option<&[f32]>,
            act: crate::Activation,
            out: &mut [f32],
        ) {
            let fmas = p
                .batch
                .saturating_mul(p.out_h * p.out_w)
                .saturating_mul(p.c_out.saturating_mul(p.c_in))
                .saturating_mul(p.kh * p.kw);
            if !crate::par::worth_splitting(par, fmas) || p.batch * p.out_h < 2 {
                return conv2d_nchwc(p, input, weight, bias, residual, act, out);
            }
            crate::nchwc::check(p, input, weight, bias, residual, out);

            #[target_feature(enable = $feat)]
            #[allow(clippy::too_many_arguments)]
            unsafe fn part(
                p: &crate::Conv2d,
                input: &[f32],
                weight: &[f32],
                bias: Option<&[f32]>,
                residual: Option<&[f32]>,
                act: crate::Activation,
                out: *mut f32,
                image: usize,
                rows: core::ops::Range<usize>,
            ) {
                let r = residual.map_or(core::ptr::null(), |r| r.as_ptr());
                // SAFETY: the features are enabled here; the operands were checked for `p`;
                // the caller gives each task rows of the output nothing else touches.
                unsafe {
                    let s = <$s>::new();
                    crate::arch::x86_64::avx2::nchwc::conv2d_part::<$s, $v, $v1, $p>(
                        s,
                        p,
                        input.as_ptr(),
                        weight.as_ptr(),
                        bias,
                        r,
                        act,
                        out,
                        image..image + 1,
                        rows,
                    )
                }
            }
            // At least one row: `batch * out_h >= 2` above.
            let chunks = (2 * par.threads()).min(p.out_h);
            let shared = crate::par::SharedMut::new(out);
            par.run(p.batch * chunks, &|t| {
                let (image, c) = (t / chunks, t % chunks);
                let rows = c * p.out_h / chunks..(c + 1) * p.out_h / chunks;
                // SAFETY: only reachable through a table built after detecting the features;
                // the tasks' (image, rows) parts of the output are disjoint (the `Parallel`
                // contract runs each index once) and `shared` borrows `out` for the whole run.
                unsafe {
                    part(
                        p,
                        input,
                        weight,
                        bias,
                        residual,
                        act,
                        shared.as_ptr(),
                        image,
                        rows,
                    )
                }
            });
        }
    };
}
pub(crate) use nchwc_entry;
