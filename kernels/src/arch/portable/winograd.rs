//! Winograd F(4x4, 3x3) convolution for 3x3, stride-1, ungrouped layers: [`transform_filter`]
//! (once, when the weights are prepared) and [`conv2d_with`] (per run).
//!
//! Algorithm sketch (Lavin & Gray 2016, with the interpolation points 0, ±1, ±2, ∞ that
//! NNPACK and ncnn use). Every 4x4 output tile is `Y = Aᵀ [U ⊙ V] A` with `U = G g Gᵀ` the
//! 6x6 transformed filter and `V = Bᵀ d B` the transformed 6x6 input patch (the tile plus a
//! 2-pixel halo). Summed over input channels, the element-wise product becomes, for each of the
//! 36 points `ξ` of the 6x6 domain, a matrix product:
//!
//! ```text
//! for each block of whole tile rows (about 96 tiles, WINOGRAD_BLOCK_TILES):
//!     V[ξ][c_in][tile]   = Bᵀ d B           for every input channel and tile of the block
//!     M[ξ][c_out][tile]  = U[ξ][c_out][c_in] · V[ξ][c_in][tile]    36 GEMMs (the ISA's GEMM)
//!     out[c_out][tile]   = act(Aᵀ M A + bias)  written back into the NCHW output
//! ```
//!
//! That is 36 multiply-adds per input channel and output channel per 16 outputs instead of
//! 144: a quarter of the direct convolution's arithmetic, paid for with the two transforms
//! (linear in the channel counts, not in their product) and a less accurate result (the
//! transforms scale values by up to 8 and 1/24; the tests bound the error against the direct
//! convolution).
//!
//! The transforms are separable: the input transform first combines six input rows into six
//! rows (`Bᵀ d`, contiguous over all the tiles of a tile row, so it vectorises), then splits
//! each row into its tiles (`· B`, gathered into per-column-phase arrays so that it vectorises
//! over tiles too). The output transform does the same in reverse. Every temporary is a
//! fixed-size stack array over a chunk of at most [`CHUNK`] tiles, so the scratch is only `V`
//! and `M` (see [`Conv2d::winograd_scratch_len`]).
//!
//! The functions are `#[inline(always)]` so that the AVX2 and AVX-512 entry points, which call
//! them inside `#[target_feature]` functions, get the transforms compiled for their vectors.

use super::epilogue::epilogue_from;
use super::matmul::GemmFn;
use crate::len::holds;
use crate::par::{worth_splitting, Parallel, Serial, SharedMut};
use crate::params::{WINOGRAD_POINTS as POINTS, WINOGRAD_TILE as TILE};
use crate::{Activation, Conv2d};

/// Edge of the transformed domain: a 4x4 tile plus the 3x3 window's halo.
const ALPHA: usize = 6;

/// Tiles of one tile row transformed together (bounds the stack temporaries).
const CHUNK: usize = 32;

/// Input columns a chunk of tiles reads (`4 * CHUNK + 2`), rounded up to whole [`LANES`].
const SPAN: usize = TILE * CHUNK + LANES;

/// The widest vector (AVX-512's 16 floats). The element-wise loops run over a multiple of it
/// within their fixed-size arrays, so that a chunk of, say, 14 tiles (a 56x56 map) is one
/// vector iteration rather than a scalar remainder loop; the extra lanes compute on zeros or
/// stale values and are never stored.
const LANES: usize = 16;

/// The input transform's fixed-size temporaries, allocated (and zeroed) on the stack once per
/// task of [`block_task`] (a range of input channels of a block of tile rows, on whichever
/// thread runs it; one task per step on one thread) rather than per chunk or per channel:
/// zeroing them per chunk cost more than the transforms on small maps, and per channel it
/// was still about 1-2 % of a network with Winograd layers. Nothing relies on their contents
/// between uses: every element read is written first, except the lanes past a chunk's end,
/// which are computed on but never stored (after the first channel they hold a previous
/// channel's finite values), and `d`'s padding, which [`input_tiles`] writes as zeros each
/// time.
struct InWork {
    d: [[f32; SPAN]; ALPHA],
    t: [[f32; SPAN]; ALPHA],
    ph: [[f32; CHUNK]; ALPHA],
    o: [[f32; CHUNK]; ALPHA],
}

impl InWork {
    #[inline(always)]
    fn new() -> Self {
        InWork {
            d: [[0.0; SPAN]; ALPHA],
            t: [[0.0; SPAN]; ALPHA],
            ph: [[0.0; CHUNK]; ALPHA],
            o: [[0.0; CHUNK]; ALPHA],
        }
    }
}

/// The output transform's temporaries, made like [`InWork`] once per task (a range of output
/// channels).
struct OutWork {
    mm: [[f32; CHUNK]; POINTS],
    s: [[[f32; CHUNK]; TILE]; ALPHA],
    y4: [[f32; CHUNK]; TILE],
    line: [f32; TILE * CHUNK],
}

impl OutWork {
    #[inline(always)]
    fn new() -> Self {
        OutWork {
            mm: [[0.0; CHUNK]; POINTS],
            s: [[[0.0; CHUNK]; TILE]; ALPHA],
            y4: [[0.0; CHUNK]; TILE],
            line: [0.0; TILE * CHUNK],
        }
    }
}

/// Tasks the input or output transform of a block is cut into, for `channels` channels on
/// `threads` threads: one on one thread (so the temporaries are made once per step), else
/// about four per thread, as the GEMM splits its work, each a contiguous range of channels
/// ([`channel_range`]).
#[inline(always)]
fn channel_tasks(channels: usize, threads: usize) -> usize {
    if threads <= 1 {
        channels.min(1)
    } else {
        channels.min(4 * threads)
    }
}

/// The channels of task `i` of `tasks` over `channels` (balanced, contiguous, together all).
#[inline(always)]
fn channel_range(i: usize, tasks: usize, channels: usize) -> core::ops::Range<usize> {
    i * channels / tasks..(i + 1) * channels / tasks
}

/// `dst[..n] = src[..n]`, as a few copies of constant lengths (which compile to vector moves)
/// for `n < 128`: a `memcpy` call costs more than copying the few floats of a chunk, and the
/// transforms copy 78 such runs per chunk of tiles and channel.
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32], n: usize) {
    #[inline(always)]
    fn fixed<const N: usize>(dst: &mut [f32], src: &[f32]) {
        dst[..N].copy_from_slice(&src[..N]);
    }
    let (dst, src) = (&mut dst[..n], &src[..n]);
    if n >= 128 {
        dst.copy_from_slice(src);
        return;
    }
    let mut i = 0;
    if n - i >= 64 {
        fixed::<64>(&mut dst[i..], &src[i..]);
        i += 64;
    }
    if n - i >= 32 {
        fixed::<32>(&mut dst[i..], &src[i..]);
        i += 32;
    }
    if n - i >= 16 {
        fixed::<16>(&mut dst[i..], &src[i..]);
        i += 16;
    }
    let (dst, src) = (&mut dst[i..], &src[i..]);
    macro_rules! tail {
        ($($k:literal)*) => {
            match n - i {
                $($k => fixed::<$k>(dst, src),)*
                _ => {}
            }
        };
    }
    tail!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
}

/// `dst[..n] = 0`, like [`copy_short`] as stores of constant lengths for `n < 128`: the input
/// transform zeroes the padding of every row it reads at the image's edges, one or two floats
/// at the sides, and as `fill` calls those were `memset` calls (about 1 % of DenseNet-121).
#[inline(always)]
fn zero_short(dst: &mut [f32], n: usize) {
    #[inline(always)]
    fn fixed<const N: usize>(dst: &mut [f32]) {
        dst[..N].fill(0.0);
    }
    let dst = &mut dst[..n];
    if n >= 128 {
        dst.fill(0.0);
        return;
    }
    let mut i = 0;
    while n - i >= 16 {
        fixed::<16>(&mut dst[i..]);
        i += 16;
    }
    let dst = &mut dst[i..];
    macro_rules! tail {
        ($($k:literal)*) => {
            match n - i {
                $($k => fixed::<$k>(dst),)*
                _ => {}
            }
        };
    }
    tail!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
}

/// `n` rounded up to whole vectors, within an array of `cap` elements.
#[inline(always)]
fn whole_vectors(n: usize, cap: usize) -> usize {
    n.next_multiple_of(LANES).min(cap)
}

/// `U[ξ][o][i] = (G g[o][i] Gᵀ)[ξ]`: the filters `weight` (`[c_out, c_in, 3, 3]`) in the
/// Winograd domain, `[36, c_out, c_in]` in `out` (each point's `[c_out, c_in]` is the
/// left-hand matrix of its GEMM). Run once when the weights are prepared, after any batch-norm
/// folding.
///
/// Panics if `weight` or `out` is shorter than that.
pub fn transform_filter(c_out: usize, c_in: usize, weight: &[f32], out: &mut [f32]) {
    assert!(
        holds(weight.len(), &[c_out, c_in, 9]) && holds(out.len(), &[POINTS, c_out, c_in]),
        "winograd::transform_filter: short slice for {c_out}x{c_in}"
    );
    let plane = c_out * c_in;
    // Filters are done in blocks, so that each point's results are written as one contiguous
    // run rather than one scattered float per filter (this runs at load time, on up to tens of
    // megabytes of filters).
    let mut block = [[0f32; FILTER_BLOCK]; POINTS];
    let mut first = 0;
    while first < plane {
        let n = FILTER_BLOCK.min(plane - first);
        for (q, g) in weight[9 * first..9 * (first + n)]
            .chunks_exact(9)
            .enumerate()
        {
            for (xi, v) in filter_tile(g).into_iter().enumerate() {
                block[xi][q] = v;
            }
        }
        for (xi, row) in block.iter().enumerate() {
            out[xi * plane + first..][..n].copy_from_slice(&row[..n]);
        }
        first += n;
    }
}

/// `U = G g Gᵀ` of one 3x3 filter `g` (row-major), point `ξ = 6 r + c` at index `ξ`: `G g`
/// (6x3), then `(G g) Gᵀ` (6x6), in f64 so that the filter adds no rounding of its own.
pub(crate) fn filter_tile(g: &[f32]) -> [f32; POINTS] {
    let mut gg = [[0f64; 3]; ALPHA];
    for col in 0..3 {
        let c = filter_points([g[col], g[3 + col], g[6 + col]].map(f64::from));
        for (r, v) in c.into_iter().enumerate() {
            gg[r][col] = v;
        }
    }
    let mut u = [0f32; POINTS];
    for (r, row) in gg.iter().enumerate() {
        for (c, v) in filter_points(*row).into_iter().enumerate() {
            u[r * ALPHA + c] = v as f32;
        }
    }
    u
}

/// Filters transformed per block by [`transform_filter`].
const FILTER_BLOCK: usize = 64;

/// `G x` for one column of three filter taps.
fn filter_points([g0, g1, g2]: [f64; 3]) -> [f64; ALPHA] {
    [
        g0 / 4.0,
        -(g0 + g1 + g2) / 6.0,
        -(g0 - g1 + g2) / 6.0,
        g0 / 24.0 + g1 / 12.0 + g2 / 6.0,
        g0 / 24.0 - g1 / 12.0 + g2 / 6.0,
        g2,
    ]
}

/// `o[i][x] = (Bᵀ s[·][x])[i]` for `x < n`.
#[inline(always)]
fn input_points<const N: usize>(s: &[[f32; N]; ALPHA], o: &mut [[f32; N]; ALPHA], n: usize) {
    for x in 0..whole_vectors(n, N) {
        let [d0, d1, d2, d3, d4, d5] = [s[0][x], s[1][x], s[2][x], s[3][x], s[4][x], s[5][x]];
        o[0][x] = 4.0 * d0 - 5.0 * d2 + d4;
        o[1][x] = -4.0 * (d1 + d2) + d3 + d4;
        o[2][x] = 4.0 * (d1 - d2) - d3 + d4;
        o[3][x] = 2.0 * (d3 - d1) - d2 + d4;
        o[4][x] = 2.0 * (d1 - d3) - d2 + d4;
        o[5][x] = 4.0 * d1 - 5.0 * d3 + d5;
    }
}

/// `o[a][x] = (Aᵀ s[·][x])[a]` for `x < n`.
#[inline(always)]
fn output_points<const N: usize>(s: [&[f32; N]; ALPHA], o: &mut [[f32; N]; TILE], n: usize) {
    let [m0, m1, m2, m3, m4, m5] = s;
    for x in 0..whole_vectors(n, N) {
        let (p12, m12) = (m1[x] + m2[x], m1[x] - m2[x]);
        let (p34, m34) = (m3[x] + m4[x], m3[x] - m4[x]);
        o[0][x] = m0[x] + p12 + p34;
        o[1][x] = m12 + 2.0 * m34;
        o[2][x] = p12 + 4.0 * p34;
        o[3][x] = m12 + 8.0 * m34 + m5[x];
    }
}

/// Convolution of a 3x3, stride-1, ungrouped layer ([`Conv2d::is_winograd_shape`]) with the
/// filters already in the Winograd domain (`u` from [`transform_filter`]); otherwise as
/// [`crate::conv2d`]: `input` `[batch, c_in, h, w]`, zero padding, `bias` `[c_out]`, the
/// activation after the bias, `out` `[batch, c_out, out_h, out_w]`. `scratch` needs
/// [`Conv2d::winograd_scratch_len`] elements; its contents on entry do not matter.
///
/// Panics if the geometry is not a Winograd one or a slice is too short.
pub fn conv2d(
    p: &Conv2d,
    input: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    conv2d_with::<Plain>(
        super::gemm::gemm,
        &Serial,
        p,
        input,
        u,
        bias,
        act,
        scratch,
        out,
    );
}

/// The three steps of one block of one image, each cut into independent tasks: the input
/// transform per range of input channels, the 36 products per point, the output transform per
/// range of output channels ([`channel_tasks`]). Each task writes only its own part of `v`, `m`
/// or `dst`.
#[derive(Debug)]
pub(crate) struct Block<'a> {
    p: &'a Conv2d,
    /// One image, `[c_in, h, w]`.
    image: &'a [f32],
    u: &'a [f32],
    bias: Option<&'a [f32]>,
    act: Activation,
    gemm: GemmFn,
    /// The scratch that every block reuses: `V[ξ][c_in][nt]` and `M[ξ][c_out][nt]` of this
    /// block at its start.
    v: &'a SharedMut<'a>,
    m: &'a SharedMut<'a>,
    /// The whole output; this block's image starts at `dst_at` (`[c_out, out_h, out_w]`).
    dst: &'a SharedMut<'a>,
    dst_at: usize,
    /// The block: tile rows `ty0..ty0 + rows`, `nt` tiles.
    ty0: usize,
    rows: usize,
    nt: usize,
    tiles_x: usize,
    /// Tasks of the input and of the output transform.
    in_tasks: usize,
    out_tasks: usize,
}

/// Which step of a [`Block`] a task belongs to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// Task `i`: the input channels of [`channel_range`] `i` into `V`.
    Input,
    /// Task `ξ`: `M[ξ] = U[ξ] · V[ξ]`.
    Products,
    /// Task `i`: the output channels of [`channel_range`] `i` from `M`.
    Output,
}

/// How a task of a [`Block`] is compiled: the SIMD tables implement it with a
/// `#[target_feature]` function around [`block_task`] (a task run from a worker thread is a
/// closure, which does not inherit its caller's features), the portable one directly.
pub(crate) trait Compiled {
    /// Runs task `i` of step `step`.
    ///
    /// # Safety
    ///
    /// As for [`block_task`], and the CPU has the implementation's features.
    unsafe fn task(b: &Block<'_>, step: Step, i: usize);
}

/// The portable compilation of [`Block`]'s tasks.
#[derive(Debug)]
pub(crate) struct Plain;

impl Compiled for Plain {
    #[inline(always)]
    unsafe fn task(b: &Block<'_>, step: Step, i: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { block_task(b, step, i) }
    }
}

/// [`conv2d`] with the 36 products done by `gemm` (the portable [`super::gemm`]'s contract)
/// and each block's steps split among `par`'s threads ([`Block`]; one thread for layers too
/// small to pay for waking the others).
#[inline(always)]
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the GEMM and the threads.
pub(crate) fn conv2d_with<C: Compiled>(
    gemm: GemmFn,
    par: &dyn Parallel,
    p: &Conv2d,
    input: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    assert!(
        p.is_winograd_shape(),
        "winograd::conv2d: not a 3x3 stride-1 ungrouped conv {p:?}"
    );
    let b = p.winograd_blocks();
    assert!(
        holds(input.len(), &[p.batch, p.c_in, p.h, p.w])
            && holds(u.len(), &[POINTS, p.c_out, p.c_in])
            && bias.is_none_or(|b| b.len() >= p.c_out)
            && holds(out.len(), &[p.batch, p.c_out, p.out_h, p.out_w])
            && p.c_in
                .checked_add(p.c_out)
                .is_some_and(|c| { holds(scratch.len(), &[POINTS, c, b.rows, b.tiles_x]) }),
        "winograd::conv2d: short slice for {p:?}"
    );
    if b.rows == 0 || p.c_out == 0 {
        return;
    }
    let block_fmas = (POINTS * p.c_out * p.c_in).saturating_mul(b.rows * b.tiles_x);
    let par = if worth_splitting(par, block_fmas) {
        par
    } else {
        &Serial
    };
    let (in_plane, out_plane) = (p.h * p.w, p.out_h * p.out_w);
    let in_tasks = channel_tasks(p.c_in, par.threads());
    let out_tasks = channel_tasks(p.c_out, par.threads());
    let (v_all, m_all) = scratch.split_at_mut(POINTS * p.c_in * b.rows * b.tiles_x);
    let (v, m, dst) = (
        SharedMut::new(v_all),
        SharedMut::new(m_all),
        SharedMut::new(&mut out[..p.batch * p.c_out * out_plane]),
    );
    // The blocks in order: tile rows, then images (each block reuses the whole scratch).
    let mut blocks = (0..b.tiles_y).step_by(b.rows).flat_map(|ty0| {
        let rows = b.rows.min(b.tiles_y - ty0);
        (0..p.batch).map(move |n| (ty0, rows, n))
    });
    let block = |(ty0, rows, n): (usize, usize, usize)| Block {
        p,
        image: &input[n * p.c_in * in_plane..][..p.c_in * in_plane],
        u,
        bias,
        act,
        gemm,
        v: &v,
        m: &m,
        dst: &dst,
        dst_at: n * p.c_out * out_plane,
        ty0,
        rows,
        nt: rows * b.tiles_x,
        tiles_x: b.tiles_x,
        in_tasks,
        out_tasks,
    };
    // One job per step, except that a block's output transform and the next block's input
    // transform are one job: they touch disjoint data (`M` and the output; the input and `V`,
    // which the products already read), so the threads meet at one barrier fewer per block.
    // On one thread the order of the work is that of three steps per block.
    let mut cur = blocks.next().map(block);
    if let Some(first) = &cur {
        par.run(in_tasks, &|i| {
            // SAFETY: `Parallel` runs each task once and the job alone; the caller of
            // `conv2d_with` chose `C` for this CPU.
            unsafe { C::task(first, Step::Input, i) }
        });
    }
    while let Some(blk) = cur {
        par.run(POINTS, &|i| {
            // SAFETY: as above; the input transform that wrote `V` has returned.
            unsafe { C::task(&blk, Step::Products, i) }
        });
        let next = blocks.next().map(block);
        let next_in = next.as_ref().map_or(0, |_| in_tasks);
        par.run(out_tasks + next_in, &|i| {
            // SAFETY: as above; the products that wrote `M` have returned, and the next
            // block's input transform writes only `V` (see `block_task`'s contract).
            unsafe {
                match &next {
                    Some(nb) if i >= out_tasks => C::task(nb, Step::Input, i - out_tasks),
                    _ => C::task(&blk, Step::Output, i),
                }
            }
        });
        cur = next;
    }
}

/// Task `i` of step `step` of block `b` (see [`Block`]).
///
/// # Safety
///
/// No other task of the same step and block runs with the same `i` at the same time, and no
/// task of another step runs at the same time (the steps read what the previous one wrote),
/// except that a block's output transform may run beside the next block's input transform (the
/// former reads `M` and writes the output, the latter reads the input and writes `V`, and
/// the blocks share only the scratch). All blocks given share `v`, `m` and `dst`.
#[inline(always)]
pub(crate) unsafe fn block_task(b: &Block<'_>, step: Step, i: usize) {
    let p = b.p;
    let nt = b.nt;
    match step {
        Step::Input => {
            let mut work = InWork::new();
            let in_plane = p.h * p.w;
            for c in channel_range(i, b.in_tasks, p.c_in) {
                let plane = &b.image[c * in_plane..][..in_plane];
                for r in 0..b.rows {
                    let mut tx0 = 0;
                    while tx0 < b.tiles_x {
                        let ch = CHUNK.min(b.tiles_x - tx0);
                        let at = c * nt + r * b.tiles_x + tx0;
                        // SAFETY: input channel `c`, of this task's range only, writes only its
                        // own runs of `V` (`at` lies in `c * nt..(c + 1) * nt` of every point's
                        // plane); the caller's contract.
                        unsafe {
                            input_tiles(
                                &mut work,
                                p,
                                plane,
                                b.ty0 + r,
                                tx0,
                                ch,
                                b.v,
                                at,
                                p.c_in * nt,
                            )
                        };
                        tx0 += ch;
                    }
                }
            }
        }
        Step::Products => {
            let a = &b.u[i * p.c_out * p.c_in..][..p.c_out * p.c_in];
            // SAFETY: point `i` reads its plane of `V` and writes its plane of `M`, which no
            // other task of this step touches; the caller's contract.
            let (bm, cm) = unsafe {
                (
                    b.v.read(i * p.c_in * nt, p.c_in * nt),
                    b.m.part(i * p.c_out * nt, p.c_out * nt),
                )
            };
            (b.gemm)(p.c_out, nt, p.c_in, a, bm, cm);
        }
        Step::Output => {
            let mut work = OutWork::new();
            let out_plane = p.out_h * p.out_w;
            let range = channel_range(i, b.out_tasks, p.c_out);
            // SAFETY: this task's output channels write only their own planes; the step only
            // reads `M`.
            let (planes, m) = unsafe {
                (
                    b.dst
                        .part(b.dst_at + range.start * out_plane, range.len() * out_plane),
                    b.m.read(0, POINTS * p.c_out * nt),
                )
            };
            for (c, plane) in range.zip(planes.chunks_exact_mut(out_plane)) {
                let shift = b.bias.map_or(0.0, |bias| bias[c]);
                for r in 0..b.rows {
                    let mut tx0 = 0;
                    while tx0 < b.tiles_x {
                        let ch = CHUNK.min(b.tiles_x - tx0);
                        let at = c * nt + r * b.tiles_x + tx0;
                        output_tiles(
                            &mut work,
                            p,
                            m,
                            at,
                            p.c_out * nt,
                            b.ty0 + r,
                            tx0,
                            ch,
                            shift,
                            b.act,
                            plane,
                        );
                        tx0 += ch;
                    }
                }
            }
        }
    }
}

/// Transforms tiles `tx0..tx0 + ch` of tile row `ty` of one input channel `plane` into
/// `v[ξ * point_stride + at + q]` for tile `q` of the chunk.
///
/// # Safety
///
/// No other reference to those elements of `v` is used while this runs.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn input_tiles(
    work: &mut InWork,
    p: &Conv2d,
    plane: &[f32],
    ty: usize,
    tx0: usize,
    ch: usize,
    v: &SharedMut<'_>,
    at: usize,
    point_stride: usize,
) {
    let width = TILE * ch + 2;
    let InWork { d, t, ph, o } = work;
    // The six input rows the tile row reads, zero outside the image (that is the padding).
    // Input column of the chunk's first column: 4 * tx0 - pad_left, possibly negative.
    let x0 = (TILE * tx0) as isize - p.pad[1] as isize;
    let lo = (-x0).clamp(0, width as isize) as usize;
    let hi = (p.w as isize - x0).clamp(lo as isize, width as isize) as usize;
    for (r, row) in d.iter_mut().enumerate() {
        let y = (TILE * ty + r) as isize - p.pad[0] as isize;
        if y < 0 || y >= p.h as isize || lo == hi {
            zero_short(row, width);
            continue;
        }
        let s0 = (x0 + lo as isize) as usize;
        // Only the image's edges have padding; the tests keep the stores off the rest.
        if lo > 0 {
            zero_short(row, lo);
        }
        copy_short(&mut row[lo..], &plane[y as usize * p.w + s0..], hi - lo);
        if hi < width {
            zero_short(&mut row[hi..], width - hi);
        }
    }
    // Bᵀ d over the rows, for every column at once.
    input_points(d, t, width);
    // · B over each row's tiles: gather the six column phases of the tiles, then combine.
    for (i, row) in t.iter().enumerate() {
        for q in 0..ch {
            let cols = &row[TILE * q..TILE * q + ALPHA];
            for k in 0..ALPHA {
                ph[k][q] = cols[k];
            }
        }
        input_points(ph, o, ch);
        for (j, oj) in o.iter().enumerate() {
            let start = (i * ALPHA + j) * point_stride + at;
            // SAFETY: the caller's contract: nothing else uses these elements now.
            copy_short(unsafe { v.part(start, ch) }, oj, ch);
        }
    }
}

/// The inverse of [`input_tiles`] for one output channel: tiles `tx0..tx0 + ch` of tile row
/// `ty` from `m[ξ * point_stride + at + q]`, plus `shift`, through `act`, into `plane`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn output_tiles(
    work: &mut OutWork,
    p: &Conv2d,
    m: &[f32],
    at: usize,
    point_stride: usize,
    ty: usize,
    tx0: usize,
    ch: usize,
    shift: f32,
    act: Activation,
    plane: &mut [f32],
) {
    let OutWork { mm, s, y4, line } = work;
    // The chunk's 36 products, copied into whole-vector arrays.
    for (xi, row) in mm.iter_mut().enumerate() {
        copy_short(row, &m[xi * point_stride + at..], ch);
    }
    // Aᵀ M over the six rows of the domain, per column j: s[j][a][q].
    for (j, sj) in s.iter_mut().enumerate() {
        output_points(core::array::from_fn(|i| &mm[i * ALPHA + j]), sj, ch);
    }
    let x0 = TILE * tx0;
    let valid = (TILE * ch).min(p.out_w - x0);
    for (a, y) in (TILE * ty..p.out_h).take(TILE).enumerate() {
        // · A over the tiles of output row a: y[b][q], interleaved into one output row.
        output_points(core::array::from_fn(|j| &s[j][a]), y4, ch);
        for q in 0..ch {
            for (bcol, yb) in y4.iter().enumerate() {
                line[TILE * q + bcol] = yb[q];
            }
        }
        let dst = &mut plane[y * p.out_w + x0..][..valid];
        epilogue_from(&line[..valid], dst, 1.0, shift, act);
    }
}
