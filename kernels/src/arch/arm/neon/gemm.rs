//! NEON matrix product for 32-bit arm: [`gemm`] (`C = A B`), packed and register-blocked, with
//! a 6x8 micro-kernel in `asm!`. Same contract as the portable kernel.
//!
//! Algorithm sketch (BLIS structure, all row-major, `A` is `m x k`, `B` is `k x n`):
//!
//! ```text
//! for each block of NC (96) columns j0..:
//!     for each block of KC (256) depths p0..:
//!         pack B[p0.., j0..] into panels of NR (8) columns, [p][8] each, zero-padded
//!         for each block of MC (36) rows i0..:
//!             pack A[i0.., p0..] into slivers of MR (6) rows, [p][6] each, zero-padded
//!             for each B panel, for each A sliver:
//!                 6x8 micro-kernel into a stack tile (12 q-register accumulators)
//!                 C tile = tile (first depth block) or C tile += tile (later blocks)
//! ```
//!
//! The micro-kernel: armv7 NEON has 16 128-bit registers. Twelve (`q4`-`q15`) hold the 6x8
//! accumulators, two (`q2`, `q3`) the eight `B` values of one depth step, and `d0`-`d2` the six
//! `A` values, each used as a by-scalar operand (`vmla.f32 q, q, d[x]`, whose scalar must sit in
//! `d0`-`d15`). Per depth step: two loads and twelve multiply-accumulates.
//!
//! `vmla.f32` (NEON only) rather than `vfma.f32` (VFPv4, a second HWCAP bit): ARMv7 has no
//! by-scalar fused form, plain NEON CPUs (Cortex-A8, A9) lack VFPv4, and `vmla` rounds the
//! product and the sum separately, exactly like the portable kernel's `c += a * b`, so results
//! differ from it only by summation order (each `C[i, j]` is summed in `p` order within a depth
//! block). Unlike VFP, NEON arithmetic flushes subnormals to zero and returns the default NaN,
//! which the harnesses' tolerances and NaN-matches-NaN rule cover.
//!
//! Packing makes every micro-kernel load contiguous and turns the tails into zero padding (the
//! padded rows and columns are computed and dropped at write-back). The packing buffers live on
//! the stack (`KC * (NC + MC)` floats, 132 KiB), because the kernels may not allocate.

use crate::len::holds;
use core::arch::asm;

/// Rows of the micro-kernel tile.
const MR: usize = 6;
/// Columns of the micro-kernel tile (two q registers).
const NR: usize = 8;
/// Depth of one packed block: a `KC x NR` panel of `B` (8 KiB) stays in a 32 KiB L1.
const KC: usize = 256;
/// Columns of one packed block of `B` (twelve panels).
const NC: usize = 12 * NR;
/// Rows of one packed block of `A` (six slivers), reused across the `NC` columns.
const MC: usize = 6 * MR;

/// `C = A B` with `A` `m x k`, `B` `k x n`, `C` `m x n`, all row-major; `C` is overwritten.
pub(super) fn gemm(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    // In release builds too, and without wrapping (`crate::len`); the micro-kernel checks its
    // own packed operands, so this is the contract's check, not what keeps the asm sound.
    assert!(
        holds(a.len(), &[m, k]) && holds(b.len(), &[k, n]) && holds(c.len(), &[m, n]),
        "gemm: short slice"
    );
    let a = &a[..m * k];
    let b = &b[..k * n];
    let c = &mut c[..m * n];
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // An empty sum (and no depth step for the micro-kernel, which needs one).
        c.fill(0.0);
        return;
    }

    let mut b_pack = [0.0f32; KC * NC];
    let mut a_pack = [0.0f32; KC * MC];
    let mut tile = [0.0f32; MR * NR];
    for j0 in (0..n).step_by(NC) {
        let nc = NC.min(n - j0);
        for p0 in (0..k).step_by(KC) {
            let kc = KC.min(k - p0);
            let first = p0 == 0;
            pack::<NR>(b, n, p0, kc, j0, nc, &mut b_pack, Order::Rows);
            for i0 in (0..m).step_by(MC) {
                let mc = MC.min(m - i0);
                pack::<MR>(a, k, p0, kc, i0, mc, &mut a_pack, Order::Columns);
                let panels = b_pack.chunks_exact(KC * NR).take(nc.div_ceil(NR));
                for (q, panel) in panels.enumerate() {
                    let j = j0 + q * NR;
                    let nr = NR.min(n - j);
                    let slivers = a_pack.chunks_exact(KC * MR).take(mc.div_ceil(MR));
                    for (s, sliver) in slivers.enumerate() {
                        let i = i0 + s * MR;
                        let mr = MR.min(m - i);
                        // SAFETY: only reachable through a table built after detecting NEON
                        // (crate::table), the one feature the micro-kernel's instructions need.
                        unsafe { kernel_6x8(kc, sliver, panel, &mut tile) };
                        for (r, t) in tile.chunks_exact(NR).take(mr).enumerate() {
                            let row = &mut c[(i + r) * n + j..][..nr];
                            if first {
                                row.copy_from_slice(&t[..nr]);
                            } else {
                                for (d, &v) in row.iter_mut().zip(t) {
                                    *d += v;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// How [`pack`] lays out a block: `Rows` copies rows of the source (`B`: a panel's `W` columns
/// at depth `p` side by side), `Columns` transposes (`A`: a sliver's `W` rows at depth `p` side
/// by side).
#[derive(Clone, Copy)]
enum Order {
    Rows,
    Columns,
}

/// Packs the `len x depth` corner of a block (`Rows`: source rows `p0..p0+depth`, columns
/// `at..at+len`; `Columns`: source rows `at..at+len`, columns `p0..p0+depth`) of the row-major
/// matrix `src` with row length `stride` into strips of `W` lines, each laid out `[p][W]` with
/// `KC * W` floats reserved, the lines past `len` zeroed.
#[allow(clippy::too_many_arguments)] // One packer for both operands.
fn pack<const W: usize>(
    src: &[f32],
    stride: usize,
    p0: usize,
    depth: usize,
    at: usize,
    len: usize,
    out: &mut [f32],
    order: Order,
) {
    let strips = out.chunks_exact_mut(KC * W).take(len.div_ceil(W));
    for (q, strip) in strips.enumerate() {
        let lines = W.min(len - q * W);
        let strip = &mut strip[..depth * W];
        match order {
            Order::Rows => {
                for (p, dst) in strip.chunks_exact_mut(W).enumerate() {
                    let from = &src[(p0 + p) * stride + at + q * W..][..lines];
                    dst[..lines].copy_from_slice(from);
                    dst[lines..].fill(0.0);
                }
            }
            Order::Columns => {
                if lines < W {
                    strip.fill(0.0);
                }
                for r in 0..lines {
                    let from = &src[(at + q * W + r) * stride + p0..][..depth];
                    for (dst, &v) in strip.chunks_exact_mut(W).zip(from) {
                        dst[r] = v;
                    }
                }
            }
        }
    }
}

/// The 6x8 micro-kernel: `tile = A_sliver B_panel` over depth `kc`, with `a` packed `[p][6]`,
/// `b` packed `[p][8]`, and `tile` row-major 6x8.
///
/// # Safety
///
/// The CPU must support NEON. (Memory safety does not depend on the caller: the lengths are
/// checked here.)
unsafe fn kernel_6x8(kc: usize, a: &[f32], b: &[f32], tile: &mut [f32; MR * NR]) {
    // The asm loop runs `kc` times and reads exactly `kc * MR` and `kc * NR` floats.
    assert!(kc >= 1 && a.len() >= kc * MR && b.len() >= kc * NR);
    // SAFETY: the caller guarantees NEON. The loads stay inside `a` and `b` (asserted above)
    // and the six 32-byte stores fill exactly `tile`'s 48 floats. The pointers advance in
    // registers declared as clobbered (`inout ... => _`); every vector register written is
    // declared (`d0`-`d2`, `d4`-`d31`; `d3` is never touched), `subs` writes the flags, which
    // `asm!` assumes clobbered without `preserves_flags`, and nothing touches the stack.
    unsafe {
        asm!(
            // The target's baseline (VFPv3) does not include NEON; the caller checked it.
            ".fpu neon",
            "vmov.i32 q4, #0",
            "vmov.i32 q5, #0",
            "vmov.i32 q6, #0",
            "vmov.i32 q7, #0",
            "vmov.i32 q8, #0",
            "vmov.i32 q9, #0",
            "vmov.i32 q10, #0",
            "vmov.i32 q11, #0",
            "vmov.i32 q12, #0",
            "vmov.i32 q13, #0",
            "vmov.i32 q14, #0",
            "vmov.i32 q15, #0",
            "2:",
            // d0 = A[0..2], d1 = A[2..4], d2 = A[4..6] at this depth; q2:q3 = B[0..8].
            "vld1.32 {{d0, d1, d2}}, [{a}]!",
            "vld1.32 {{d4, d5, d6, d7}}, [{b}]!",
            // Row r of the tile is q(4+2r) (columns 0..4) and q(5+2r) (columns 4..8).
            "vmla.f32 q4, q2, d0[0]",
            "vmla.f32 q5, q3, d0[0]",
            "vmla.f32 q6, q2, d0[1]",
            "vmla.f32 q7, q3, d0[1]",
            "vmla.f32 q8, q2, d1[0]",
            "vmla.f32 q9, q3, d1[0]",
            "vmla.f32 q10, q2, d1[1]",
            "vmla.f32 q11, q3, d1[1]",
            "vmla.f32 q12, q2, d2[0]",
            "vmla.f32 q13, q3, d2[0]",
            "vmla.f32 q14, q2, d2[1]",
            "vmla.f32 q15, q3, d2[1]",
            "subs {kc}, {kc}, #1",
            "bne 2b",
            "vst1.32 {{d8, d9, d10, d11}}, [{tile}]!",
            "vst1.32 {{d12, d13, d14, d15}}, [{tile}]!",
            "vst1.32 {{d16, d17, d18, d19}}, [{tile}]!",
            "vst1.32 {{d20, d21, d22, d23}}, [{tile}]!",
            "vst1.32 {{d24, d25, d26, d27}}, [{tile}]!",
            "vst1.32 {{d28, d29, d30, d31}}, [{tile}]!",
            a = inout(reg) a.as_ptr() => _,
            b = inout(reg) b.as_ptr() => _,
            kc = inout(reg) kc => _,
            tile = inout(reg) tile.as_mut_ptr() => _,
            out("d0") _, out("d1") _, out("d2") _,
            out("d4") _, out("d5") _, out("d6") _, out("d7") _,
            out("d8") _, out("d9") _, out("d10") _, out("d11") _,
            out("d12") _, out("d13") _, out("d14") _, out("d15") _,
            out("d16") _, out("d17") _, out("d18") _, out("d19") _,
            out("d20") _, out("d21") _, out("d22") _, out("d23") _,
            out("d24") _, out("d25") _, out("d26") _, out("d27") _,
            out("d28") _, out("d29") _, out("d30") _, out("d31") _,
            options(nostack),
        );
    }
}
