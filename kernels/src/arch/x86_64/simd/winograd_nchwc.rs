//! The two transforms of the blocked Winograd convolution ([`crate::nchwc::winograd`]) on
//! whole vectors: the same arithmetic as the portable
//! [`block_task`](crate::arch::portable::winograd_nchwc::block_task), with the sixteen
//! channels of a pixel as one (AVX-512) or two (AVX2) vectors and the transforms' constant
//! multiplies fused into their adds. The 36 products stay the ISA's table GEMM.
//!
//! ```text
//! input, per tile and input block, per vector of its 16 channels:
//!     t[·][c] = Bᵀ (the 6 pixels of column c, zero outside the image)   6 columns
//!     V[6a + ·] = Bᵀ t[a][·]                                             6 rows, 36 stores
//! output, per tile and output block, per vector of its 16 channels:
//!     s[·][c] = Aᵀ (points 6r + c of M, r = 0..6)                        6 columns
//!     y[a][·] = Aᵀ s[a][·] + bias (+ residual) → act                     4 rows x 4 pixels
//! ```
//!
//! Why. The portable transforms are written over `[f32; 16]` arrays and leave LLVM to find the
//! vectors; what it made of them zeroed and copied the 6x6 arrays through the stack for every
//! tile and kept the activation's `match` inside the pixel loop. Here every intermediate is a
//! register (or one spill), the loads and stores are whole vectors whose bounds are checked
//! once per task, and the activation is specialised outside the loops.
//!
//! Results agree with the portable transforms to rounding (fused multiply-adds); the tests
//! compare both with the direct blocked reference.

use core::mem::MaybeUninit;

use super::math::{specialise, Act};
use super::vector::{array, Simd};
use crate::arch::portable::winograd_nchwc::{block_task, tile_range, Block, Step, ALPHA};
use crate::nchwc::BLOCK;
use crate::params::{WINOGRAD_POINTS as POINTS, WINOGRAD_TILE as TILE};

/// Task `i` of step `step` of block `b`: the transforms here, the products on the table's
/// GEMM through the portable task.
///
/// # Safety
///
/// As for [`block_task`].
#[inline(always)]
pub(crate) unsafe fn task<S: Simd>(s: S, b: &Block<'_>, step: Step, i: usize) {
    match step {
        // SAFETY: forwarded from the caller.
        Step::Input => unsafe { input_step(s, b, i) },
        // SAFETY: forwarded from the caller.
        Step::Products => unsafe { block_task(b, step, i) },
        // SAFETY: forwarded from the caller.
        Step::Output => specialise!(s, b.act, a => unsafe { output_step(s, a, b, i) }),
    }
}

/// `Bᵀ d` for six vectors.
#[inline(always)]
fn input_points<S: Simd>(s: S, d: &[S::V; ALPHA]) -> [S::V; ALPHA] {
    let (four, five, two) = (s.splat(4.0), s.splat(-5.0), s.splat(2.0));
    let d42 = s.sub(d[4], d[2]);
    [
        s.fmadd(four, d[0], s.fmadd(five, d[2], d[4])),
        s.fmadd(s.splat(-4.0), s.add(d[1], d[2]), s.add(d[3], d[4])),
        s.fmadd(four, s.sub(d[1], d[2]), s.sub(d[4], d[3])),
        s.fmadd(two, s.sub(d[3], d[1]), d42),
        s.fmadd(two, s.sub(d[1], d[3]), d42),
        s.fmadd(four, d[1], s.fmadd(five, d[3], d[5])),
    ]
}

/// `Aᵀ m` for six vectors.
#[inline(always)]
fn output_points<S: Simd>(s: S, m: &[S::V; ALPHA]) -> [S::V; TILE] {
    let (p12, m12) = (s.add(m[1], m[2]), s.sub(m[1], m[2]));
    let (p34, m34) = (s.add(m[3], m[4]), s.sub(m[3], m[4]));
    [
        s.add(s.add(m[0], p12), p34),
        s.fmadd(s.splat(2.0), m34, m12),
        s.fmadd(s.splat(4.0), p34, p12),
        s.add(s.fmadd(s.splat(8.0), m34, m12), m[5]),
    ]
}

/// The input transform of task `i`: its tiles' `V` rows.
///
/// # Safety
///
/// As for [`block_task`].
#[inline(always)]
unsafe fn input_step<S: Simd>(s: S, b: &Block<'_>, i: usize) {
    let (p, t, nt) = (b.p, b.t, b.nt);
    let plane = p.h * p.w * BLOCK;
    assert!(b.image.len() >= t.ci / BLOCK * plane && b.v.len() >= POINTS * nt * t.ci);
    let (image, v) = (b.image.as_ptr(), b.v.as_ptr());
    for q in tile_range(i, b.tasks, nt) {
        let tile = b.t0 + q;
        let (ty, tx) = (tile / t.tiles_x, tile % t.tiles_x);
        // The window's first row and column; "negative" ones wrap to huge values, which
        // the bounds tests below reject.
        let (y0, x0) = (
            (TILE * ty).wrapping_sub(p.pad[0]),
            (TILE * tx).wrapping_sub(p.pad[1]),
        );
        let inside = y0 < p.h && p.h - y0 >= ALPHA && x0 < p.w && p.w - x0 >= ALPHA;
        for ib in 0..t.ci / BLOCK {
            for h0 in (0..BLOCK).step_by(S::LANES) {
                let at = |r: usize, c: usize| {
                    let (y, x) = (y0.wrapping_add(r), x0.wrapping_add(c));
                    if inside || (y < p.h && x < p.w) {
                        // SAFETY: pixel `(y, x)` of block `ib` is inside the image, whose
                        // length was checked above.
                        unsafe { s.load_ptr(image.add(ib * plane + (y * p.w + x) * BLOCK + h0)) }
                    } else {
                        s.zero()
                    }
                };
                let mut tr = [[MaybeUninit::uninit(); ALPHA]; ALPHA];
                for c in 0..ALPHA {
                    for (row, x) in tr.iter_mut().zip(input_points(s, &array(|r| at(r, c)))) {
                        row[c].write(x);
                    }
                }
                for (a, row) in tr.iter().enumerate() {
                    // SAFETY: the loop above wrote every element.
                    let row = array(|c| unsafe { row[c].assume_init() });
                    for (k, x) in input_points(s, &row).into_iter().enumerate() {
                        let to = ((a * ALPHA + k) * nt + q) * t.ci + ib * BLOCK + h0;
                        // SAFETY: inside `V` (checked above: `ξ < 36`, `q < nt`, the lanes
                        // within `ci`); tile `q`'s row of each point belongs to this task
                        // alone (the caller's contract).
                        unsafe { s.store_ptr(v.add(to), x) };
                    }
                }
            }
        }
    }
}

/// The output transform of task `i`: its tiles' pixels of every output block.
///
/// # Safety
///
/// As for [`block_task`].
#[inline(always)]
unsafe fn output_step<S: Simd, A: Act<S>>(s: S, act: A, b: &Block<'_>, i: usize) {
    let (p, t, nt) = (b.p, b.t, b.nt);
    let stride = nt * t.co;
    // SAFETY: this step only reads `M`; the caller's contract.
    let m = unsafe { b.m.read(0, POINTS * stride) };
    let plane = p.out_h * p.out_w * BLOCK;
    let image = t.co / BLOCK * plane;
    assert!(b.dst.len() >= b.dst_at + image && b.residual.is_none_or(|r| r.len() >= image));
    let dst = b.dst.as_ptr().wrapping_add(b.dst_at);
    for q in tile_range(i, b.tasks, nt) {
        let tile = b.t0 + q;
        let (oy, ox) = (TILE * (tile / t.tiles_x), TILE * (tile % t.tiles_x));
        let (rows, cols) = (TILE.min(p.out_h - oy), TILE.min(p.out_w - ox));
        for ob in 0..t.co / BLOCK {
            for h0 in (0..BLOCK).step_by(S::LANES) {
                let first = q * t.co + ob * BLOCK + h0;
                let bias = match b.bias {
                    Some(bs) => s.load_partial(&bs[(ob * BLOCK + h0).min(p.c_out)..p.c_out]),
                    None => s.zero(),
                };
                let mut sm = [[MaybeUninit::uninit(); ALPHA]; TILE];
                for c in 0..ALPHA {
                    // Point `6r + c` of this tile's vector: inside `M` as `first + LANES <=
                    // stride`.
                    let col = array(|r| s.load(&m[(r * ALPHA + c) * stride + first..]));
                    for (row, x) in sm.iter_mut().zip(output_points(s, &col)) {
                        row[c].write(x);
                    }
                }
                for (a, row) in sm[..rows].iter().enumerate() {
                    // SAFETY: the loop above wrote every element.
                    let row = array(|c| unsafe { row[c].assume_init() });
                    for (k, y) in output_points(s, &row)[..cols].iter().enumerate() {
                        let at = ob * plane + ((oy + a) * p.out_w + ox + k) * BLOCK + h0;
                        let mut y = s.add(*y, bias);
                        if let Some(r) = b.residual {
                            // SAFETY: pixel `(oy + a, ox + k)` of block `ob` is inside the
                            // residual (checked above).
                            y = s.add(y, unsafe { s.load_ptr(r.as_ptr().add(at)) });
                        }
                        // SAFETY: inside this image's output (checked above); the pixel
                        // belongs to tile `q` of this task alone (the caller's contract).
                        unsafe { s.store_ptr(dst.add(at), act.apply(s, y)) };
                    }
                }
            }
        }
    }
}
