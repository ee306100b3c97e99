//! Winograd F(4x4, 3x3) in the blocked channel layout ([`crate::nchwc`], NCHW16c): the same
//! arithmetic as [`super::winograd`], with the sixteen channels of a block along the vector
//! lanes instead of the tiles.
//!
//! Algorithm sketch (one image; `ci`, `co` the channel counts rounded up to whole blocks):
//!
//! ```text
//! U[ξ][ci][co] = (G g[co][ci] Gᵀ)[ξ]                 once, when the weights are prepared
//! for each block of nt output tiles (balanced, at most about 1.5 MB of V and M):
//!     for each tile t, input block ib:                 6x6 pixels of 16 channels, zero outside
//!         V[ξ][t][16 ib..] = (Bᵀ d B)[ξ]               36 vectors, lane = channel
//!     M[ξ][t][co] = V[ξ][t][ci] · U[ξ][ci][co]         36 GEMMs, nt x co, depth ci
//!     for each tile t, output block ob:
//!         y = Aᵀ M[·][t][16 ob..] A + bias (+ residual) → act → the tile's 4x4 pixels of block ob
//! ```
//!
//! **Why.** In NCHW the 36 products are `M = U V` with the tiles along the GEMM's columns and
//! the output channels along its rows: a layer with few output channels (DenseNet-121's
//! 128 -> 32) or a block of 98 tiles (a 56x56 map) wastes much of the 12 x 32 micro-tile. Here
//! the output channels are the columns (whole 32-channel panels for any multiple of 32) and the
//! tiles the rows, and both transforms move whole 16-channel vectors: no gathers of column
//! phases, no scattered stores. It also lets a blocked region keep its 3x3 stride-1 layers
//! blocked instead of converting around an NCHW Winograd layer.
//!
//! On x86 the two transforms run on whole vectors (`arch/x86_64/simd/winograd_nchwc.rs`,
//! 0.6-0.75 of this code's time for the whole layer at 28x28 and 56x56); the steps, the
//! tiling and the products are this module's.
//!
//! The padding channels of the input (past `c_in` in its last block) meet zero rows of `U`,
//! so they add nothing (they are finite: the layout's contract); the output's padding channels
//! get zero sums, a zero bias and the activation, like the direct blocked kernel's.

use super::matmul::GemmFn;
use super::winograd::filter_tile;
use crate::len::holds;
use crate::nchwc::{blocked_len, blocks, BLOCK};
use crate::par::{worth_splitting, Parallel, Serial, SharedMut};
use crate::params::{WINOGRAD_POINTS as POINTS, WINOGRAD_TILE as TILE};
use crate::{Activation, Conv2d};

/// Edge of the transformed domain: a 4x4 tile plus the 3x3 window's halo.
pub(crate) const ALPHA: usize = 6;

/// Floats of `V` and `M` one block of tiles may take (1.5 MiB): the block's transforms and
/// products then run in the L2 of the cores kiln is measured on.
const BLOCK_FLOATS: usize = 768 * 1024;

/// The fewest tiles of a block unless the image has fewer: a 14x14 map's sixteen tiles stay
/// one block even with 512 channels, so that each point's `U` is read once per image.
const MIN_TILES: usize = 16;

/// How [`conv2d_with`] blocks the output tiles of one image.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tiling {
    /// Tiles per output row, and per image.
    pub(crate) tiles_x: usize,
    pub(crate) tiles: usize,
    /// Tiles per block (every block but the last has exactly this many).
    pub(crate) nt: usize,
    /// Channels rounded up to whole blocks.
    pub(crate) ci: usize,
    pub(crate) co: usize,
}

/// The tiling of `p`: blocks of balanced size, each at most [`BLOCK_FLOATS`] of scratch (or
/// [`MIN_TILES`] tiles).
pub(crate) const fn tiling(p: &Conv2d) -> Tiling {
    let tiles_x = p.out_w.div_ceil(TILE);
    let tiles = tiles_x * p.out_h.div_ceil(TILE);
    let (ci, co) = (blocks(p.c_in) * BLOCK, blocks(p.c_out) * BLOCK);
    let per_tile = POINTS * (ci + co);
    let most = match BLOCK_FLOATS.checked_div(per_tile) {
        None => tiles,
        Some(m) if m < MIN_TILES => MIN_TILES,
        Some(m) => m,
    };
    let nt = if tiles == 0 {
        0
    } else {
        tiles.div_ceil(tiles.div_ceil(most))
    };
    Tiling {
        tiles_x,
        tiles,
        nt,
        ci,
        co,
    }
}

/// Floats of the transformed filters ([`transform_filter`]) of a `c_out x c_in` 3x3 layer.
pub const fn filter_len(c_out: usize, c_in: usize) -> usize {
    POINTS * blocks(c_in) * BLOCK * blocks(c_out) * BLOCK
}

/// Floats of scratch [`conv2d`] needs for `p`: one block's `V` and `M`.
pub const fn scratch_len(p: &Conv2d) -> usize {
    let t = tiling(p);
    POINTS * t.nt * (t.ci + t.co)
}

/// `U[ξ][i][o] = (G g[o][i] Gᵀ)[ξ]`: the filters `weight` (`[c_out, c_in, 3, 3]`) in the
/// Winograd domain, `[36, ci, co]` with the channels rounded up to whole blocks (the padding
/// zero), each point's `[ci, co]` the right-hand matrix of its GEMM. Run once when the
/// weights are prepared, after any batch-norm folding.
///
/// Panics if `weight` or `out` is shorter than that.
pub fn transform_filter(c_out: usize, c_in: usize, weight: &[f32], out: &mut [f32]) {
    let len = filter_len(c_out, c_in);
    assert!(
        holds(weight.len(), &[c_out, c_in, 9]) && out.len() >= len,
        "nchwc::winograd::transform_filter: short slice for {c_out}x{c_in}"
    );
    let (ci, co) = (blocks(c_in) * BLOCK, blocks(c_out) * BLOCK);
    let out = &mut out[..len];
    out.fill(0.0);
    for o in 0..c_out {
        for i in 0..c_in {
            let u = filter_tile(&weight[(o * c_in + i) * 9..][..9]);
            for (xi, v) in u.into_iter().enumerate() {
                out[(xi * ci + i) * co + o] = v;
            }
        }
    }
}

/// The blocked Winograd convolution, portable: `out = act(conv(input, weight) + bias +
/// residual)` for a 3x3 stride-1 ungrouped layer ([`Conv2d::is_winograd_shape`]), with
/// `input`, `residual` and `out` in NCHW16c, `u` from [`transform_filter`] and `scratch` of
/// [`scratch_len`] floats (its contents on entry do not matter).
///
/// Panics if the geometry is not a Winograd one or a slice is too short.
#[allow(clippy::too_many_arguments)] // The blocked convolution's contract plus the scratch.
pub fn conv2d(
    p: &Conv2d,
    input: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
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
        residual,
        act,
        scratch,
        out,
    );
}

/// One block of tiles of one image; its three steps are cut into independent tasks (the
/// transforms by tiles, the products by point), each writing only its own part of `v`, `m`
/// or `dst`.
#[derive(Debug)]
pub(crate) struct Block<'a> {
    pub(crate) p: &'a Conv2d,
    pub(crate) t: Tiling,
    /// One image, blocked: `[ci / 16][h][w][16]`.
    pub(crate) image: &'a [f32],
    pub(crate) u: &'a [f32],
    pub(crate) bias: Option<&'a [f32]>,
    /// The residual of this image, laid out as its output.
    pub(crate) residual: Option<&'a [f32]>,
    pub(crate) act: Activation,
    pub(crate) gemm: GemmFn,
    /// `V[ξ][nt][ci]` and `M[ξ][nt][co]` of this block at the scratch's start.
    pub(crate) v: &'a SharedMut<'a>,
    pub(crate) m: &'a SharedMut<'a>,
    /// The whole output; this image's starts at `dst_at`.
    pub(crate) dst: &'a SharedMut<'a>,
    pub(crate) dst_at: usize,
    /// The block: tiles `t0..t0 + nt` of the image (row-major over tile rows).
    pub(crate) t0: usize,
    pub(crate) nt: usize,
    /// Tasks of each transform.
    pub(crate) tasks: usize,
}

/// Which step of a [`Block`] a task belongs to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    /// Task `i`: tile range `i` into `V`.
    Input,
    /// Task `ξ`: `M[ξ] = V[ξ] · U[ξ]`.
    Products,
    /// Task `i`: tile range `i` from `M` into the output.
    Output,
}

/// How a task of a [`Block`] is compiled (see [`super::winograd::Compiled`]: a task on a
/// worker thread is a closure, which does not inherit its caller's target features).
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

/// [`conv2d`] with the 36 products done by `gemm` and each block's steps split among `par`'s
/// threads.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the GEMM and the threads.
pub(crate) fn conv2d_with<C: Compiled>(
    gemm: GemmFn,
    par: &dyn Parallel,
    p: &Conv2d,
    input: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    let t = tiling(p);
    let out_len = blocked_len(p.batch, p.c_out, p.out_h, p.out_w);
    assert!(
        p.is_winograd_shape()
            && p.out_h <= p.h + p.pad[0] + p.pad[2]
            && p.out_w <= p.w + p.pad[1] + p.pad[3],
        "nchwc::winograd::conv2d: not a 3x3 stride-1 ungrouped conv {p:?}"
    );
    assert!(
        input.len() >= blocked_len(p.batch, p.c_in, p.h, p.w)
            && u.len() >= filter_len(p.c_out, p.c_in)
            && bias.is_none_or(|b| b.len() >= p.c_out)
            && residual.is_none_or(|r| r.len() >= out_len)
            && out.len() >= out_len
            && scratch.len() >= scratch_len(p),
        "nchwc::winograd::conv2d: short slice for {p:?}"
    );
    if out_len == 0 {
        return;
    }
    let block_fmas = (POINTS * t.ci * t.co).saturating_mul(t.nt);
    let par = if worth_splitting(par, block_fmas) {
        par
    } else {
        &Serial
    };
    let tasks = if par.threads() <= 1 {
        1
    } else {
        t.nt.min(4 * par.threads())
    };
    let (in_img, out_img) = (
        blocked_len(1, p.c_in, p.h, p.w),
        blocked_len(1, p.c_out, p.out_h, p.out_w),
    );
    let (v_all, m_all) = scratch[..scratch_len(p)].split_at_mut(POINTS * t.nt * t.ci);
    let (v, m, dst) = (
        SharedMut::new(v_all),
        SharedMut::new(m_all),
        SharedMut::new(&mut out[..out_len]),
    );
    for n in 0..p.batch {
        for t0 in (0..t.tiles).step_by(t.nt) {
            let b = Block {
                p,
                t,
                image: &input[n * in_img..][..in_img],
                u,
                bias,
                residual: residual.map(|r| &r[n * out_img..][..out_img]),
                act,
                gemm,
                v: &v,
                m: &m,
                dst: &dst,
                dst_at: n * out_img,
                t0,
                nt: t.nt.min(t.tiles - t0),
                tasks,
            };
            for (step, count) in [
                (Step::Input, tasks),
                (Step::Products, POINTS),
                (Step::Output, tasks),
            ] {
                par.run(count, &|i| {
                    // SAFETY: `Parallel` runs each task once and the job alone, the steps one
                    // after another; the caller of `conv2d_with` chose `C` for this CPU.
                    unsafe { C::task(&b, step, i) }
                });
            }
        }
    }
}

/// The tiles of task `i` of `tasks` over a block of `nt` (balanced, contiguous, together all).
#[inline(always)]
pub(crate) fn tile_range(i: usize, tasks: usize, nt: usize) -> core::ops::Range<usize> {
    i * nt / tasks..(i + 1) * nt / tasks
}

/// Sixteen lanes: one block's channels of one pixel or point.
type Lanes = [f32; BLOCK];

/// Task `i` of step `step` of block `b` (see [`Block`]).
///
/// # Safety
///
/// No other task of the same step and block runs with the same `i` at the same time, and no
/// task of another step or block runs at the same time (each step reads what the previous one
/// wrote; the blocks share the scratch).
#[inline(always)]
pub(crate) unsafe fn block_task(b: &Block<'_>, step: Step, i: usize) {
    let (p, t, nt) = (b.p, b.t, b.nt);
    match step {
        Step::Input => {
            for q in tile_range(i, b.tasks, nt) {
                let tile = b.t0 + q;
                let (ty, tx) = (tile / t.tiles_x, tile % t.tiles_x);
                for ib in 0..t.ci / BLOCK {
                    let v = input_tile(p, b.image, ib, ty, tx);
                    for (xi, v) in v.iter().enumerate() {
                        // SAFETY: tile `q` of this task's range writes only its own row of each
                        // point's `V`; the caller's contract.
                        let to = unsafe { b.v.part((xi * nt + q) * t.ci + ib * BLOCK, BLOCK) };
                        to.copy_from_slice(v);
                    }
                }
            }
        }
        Step::Products => {
            let u = &b.u[i * t.ci * t.co..][..t.ci * t.co];
            // SAFETY: point `i` reads its plane of `V` and writes its plane of `M`, which no
            // other task of this step touches; the caller's contract.
            let (vm, mm) = unsafe {
                (
                    b.v.read(i * nt * t.ci, nt * t.ci),
                    b.m.part(i * nt * t.co, nt * t.co),
                )
            };
            (b.gemm)(nt, t.co, t.ci, vm, u, mm);
        }
        Step::Output => {
            // SAFETY: this step only reads `M`; the caller's contract.
            let m = unsafe { b.m.read(0, POINTS * nt * t.co) };
            for q in tile_range(i, b.tasks, nt) {
                let tile = b.t0 + q;
                let (ty, tx) = (tile / t.tiles_x, tile % t.tiles_x);
                for ob in 0..t.co / BLOCK {
                    // Point `ξ` of this tile and block: `m[ξ * nt * co + at..][..16]`.
                    let at = q * t.co + ob * BLOCK;
                    // SAFETY: tile `q` writes only its own pixels; the caller's contract.
                    unsafe { output_tile(b, m, at, nt * t.co, ob, ty, tx) };
                }
            }
        }
    }
}

/// `Bᵀ d B` of input block `ib` for tile `(ty, tx)`, its 6x6 input pixels zero outside the
/// image: point `ξ` at index `ξ`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // `c` indexes the inner axis of `t`.
fn input_tile(p: &Conv2d, image: &[f32], ib: usize, ty: usize, tx: usize) -> [Lanes; POINTS] {
    let plane = &image[ib * p.h * p.w * BLOCK..][..p.h * p.w * BLOCK];
    let rows: [usize; ALPHA] = core::array::from_fn(|r| (TILE * ty + r).wrapping_sub(p.pad[0]));
    // Bᵀ d over the rows, one column of six pixels at a time: t[a][c].
    let mut t = [[[0.0; BLOCK]; ALPHA]; ALPHA];
    for c in 0..ALPHA {
        let x = (TILE * tx + c).wrapping_sub(p.pad[1]);
        let col: [Lanes; ALPHA] = core::array::from_fn(|r| {
            let y = rows[r];
            if y < p.h && x < p.w {
                let mut v = [0.0; BLOCK];
                v.copy_from_slice(&plane[(y * p.w + x) * BLOCK..][..BLOCK]);
                v
            } else {
                [0.0; BLOCK]
            }
        });
        let o = input_points(&col);
        for (a, o) in o.into_iter().enumerate() {
            t[a][c] = o;
        }
    }
    // · B over the columns, one row at a time.
    let mut v = [[0.0; BLOCK]; POINTS];
    for (a, row) in t.iter().enumerate() {
        let o = input_points(row);
        v[a * ALPHA..][..ALPHA].copy_from_slice(&o);
    }
    v
}

/// `Bᵀ s` for six vectors.
#[inline(always)]
fn input_points(s: &[Lanes; ALPHA]) -> [Lanes; ALPHA] {
    let mut o = [[0.0; BLOCK]; ALPHA];
    for l in 0..BLOCK {
        let [d0, d1, d2, d3, d4, d5] = [s[0][l], s[1][l], s[2][l], s[3][l], s[4][l], s[5][l]];
        o[0][l] = 4.0 * d0 - 5.0 * d2 + d4;
        o[1][l] = -4.0 * (d1 + d2) + d3 + d4;
        o[2][l] = 4.0 * (d1 - d2) - d3 + d4;
        o[3][l] = 2.0 * (d3 - d1) - d2 + d4;
        o[4][l] = 2.0 * (d1 - d3) - d2 + d4;
        o[5][l] = 4.0 * d1 - 5.0 * d3 + d5;
    }
    o
}

/// `Aᵀ s` for six vectors.
#[inline(always)]
fn output_points(s: &[Lanes; ALPHA]) -> [Lanes; TILE] {
    let mut o = [[0.0; BLOCK]; TILE];
    for l in 0..BLOCK {
        let [m0, m1, m2, m3, m4, m5] = [s[0][l], s[1][l], s[2][l], s[3][l], s[4][l], s[5][l]];
        let (p12, m12) = (m1 + m2, m1 - m2);
        let (p34, m34) = (m3 + m4, m3 - m4);
        o[0][l] = m0 + p12 + p34;
        o[1][l] = m12 + 2.0 * m34;
        o[2][l] = p12 + 4.0 * p34;
        o[3][l] = m12 + 8.0 * m34 + m5;
    }
    o
}

/// `Aᵀ M A` of output block `ob` for tile `(ty, tx)` (point `ξ` at `m[ξ * stride + at..]`),
/// plus the bias and the residual, through the activation, into the tile's pixels inside the
/// output.
///
/// # Safety
///
/// No other reference to those pixels of `b.dst` is used while this runs.
#[inline(always)]
unsafe fn output_tile(
    b: &Block<'_>,
    m: &[f32],
    at: usize,
    stride: usize,
    ob: usize,
    ty: usize,
    tx: usize,
) {
    let p = b.p;
    // Aᵀ M over the rows, one column of six points at a time: s[a][c].
    let mut s = [[[0.0; BLOCK]; ALPHA]; TILE];
    for c in 0..ALPHA {
        let col: [Lanes; ALPHA] = core::array::from_fn(|r| {
            let mut v = [0.0; BLOCK];
            v.copy_from_slice(&m[(r * ALPHA + c) * stride + at..][..BLOCK]);
            v
        });
        for (a, o) in output_points(&col).into_iter().enumerate() {
            s[a][c] = o;
        }
    }
    let mut bias = [0.0; BLOCK];
    if let Some(bs) = b.bias {
        let n = BLOCK.min(p.c_out - ob * BLOCK);
        bias[..n].copy_from_slice(&bs[ob * BLOCK..][..n]);
    }
    let plane = p.out_h * p.out_w * BLOCK;
    for (a, row) in s.iter().enumerate() {
        let oy = TILE * ty + a;
        if oy >= p.out_h {
            break;
        }
        for (col, y) in output_points(row).iter().enumerate() {
            let ox = TILE * tx + col;
            if ox >= p.out_w {
                break;
            }
            let at = ob * plane + (oy * p.out_w + ox) * BLOCK;
            let mut res = [0.0; BLOCK];
            if let Some(r) = b.residual {
                res.copy_from_slice(&r[at..][..BLOCK]);
            }
            // SAFETY: pixel `(oy, ox)` of block `ob` belongs to this tile only; the caller's
            // contract.
            let to = unsafe { b.dst.part(b.dst_at + at, BLOCK) };
            for l in 0..BLOCK {
                to[l] = b.act.apply(y[l] + bias[l] + res[l]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nchwc;
    use crate::testutil::XorShift;
    use std::vec;

    /// Against the blocked direct reference ([`nchwc::conv2d`]) on shapes with partial
    /// blocks, partial tiles, asymmetric padding, a residual, two images and several blocks
    /// of tiles.
    #[test]
    fn matches_direct_reference() {
        for &(c_in, c_out, h, w, pad, batch) in &[
            (3, 5, 7, 6, [1, 1, 1, 1], 1),
            (17, 33, 9, 11, [1, 0, 2, 1], 2),
            (32, 32, 14, 14, [1, 1, 1, 1], 1),
            (64, 64, 56, 56, [1, 1, 1, 1], 1),
            (16, 48, 5, 5, [0, 0, 0, 0], 1),
        ] {
            let p = Conv2d {
                batch,
                c_in,
                h,
                w,
                c_out,
                kh: 3,
                kw: 3,
                stride: [1, 1],
                dilation: [1, 1],
                pad,
                groups: 1,
                out_h: h + pad[0] + pad[2] - 2,
                out_w: w + pad[1] + pad[3] - 2,
            };
            let mut rng = XorShift::new((c_in * 31 + c_out) as u32);
            let x = rng.vec(batch * c_in * h * w);
            let wt = rng.vec(c_out * c_in * 9);
            let bias = rng.vec(c_out);
            let res = rng.vec(nchwc::blocked_len(batch, c_out, p.out_h, p.out_w));
            let mut xb = vec![0.0; nchwc::blocked_len(batch, c_in, h, w)];
            nchwc::to_blocked(batch, c_in, h, w, &x, &mut xb);
            let mut packed = vec![0.0; nchwc::packed_weight_len(c_out, c_in, 3, 3)];
            nchwc::pack_weights(c_out, c_in, 3, 3, &wt, &mut packed);
            let mut want = vec![0.0; res.len()];
            let act = Activation::Relu;
            nchwc::conv2d(&p, &xb, &packed, Some(&bias), Some(&res), act, &mut want);
            let mut u = vec![0.0; filter_len(c_out, c_in)];
            transform_filter(c_out, c_in, &wt, &mut u);
            let mut scratch = vec![f32::NAN; scratch_len(&p)];
            let mut got = vec![f32::NAN; res.len()];
            conv2d(
                &p,
                &xb,
                &u,
                Some(&bias),
                Some(&res),
                act,
                &mut scratch,
                &mut got,
            );
            let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-4 * scale,
                    "{p:?}: element {k}: {g} against {w}"
                );
            }
        }
    }
}
