//! NEON depthwise convolution: [`depthwise_conv2d`] has [`conv2d`](crate::conv2d)'s contract
//! for convolutions with one input and one output channel per group (`conv.rs` routes those
//! here). It needs no scratch.
//!
//! Algorithm sketch, per channel plane and output row `oy`:
//!
//! ```text
//! taps  = the kernel rows ky whose input row iy = oy*sh + ky*dh - pt is inside the image
//! left  = outputs ox whose leftmost tap falls in the left padding      -> scalar, per tap test
//! inner = outputs whose every tap (kx = 0..kw) is inside the row, four at a time:
//!             acc = 0; for ky in taps, kx in 0..kw: acc += w[ky,kx] * in[iy, 4 outputs' ix]
//!         stride 1: one plain load per tap; stride 2: one `ld2` (even lanes) per tap
//! right = the rest, including ceil-mode outputs past the input              -> scalar
//! then act(row + bias) through the vector epilogue, while the row is in cache
//! ```
//!
//! Keeping the four outputs in a register for all taps (instead of one pass over the plane
//! per tap) means each output is stored once. The kernel width is a const generic for the
//! common 3x3 and 5x5 windows so the tap loop unrolls; other widths and strides above 2 take
//! the same loops with a run-time width (strides above 2 entirely scalar). Sums run tap by tap
//! in `(ky, kx)` order like the portable kernel, with fused multiply-adds.

use super::conv::valid_range;
use super::simd::{epilogue, load, load_even, store, LANES};
use crate::{Activation, Conv2d};
use core::arch::aarch64::*;

/// Depthwise convolution (`c_in == c_out == groups`); see [`conv2d`](crate::conv2d) for the
/// layout of every argument. `scratch` is unused.
pub(crate) fn depthwise_conv2d(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    _scratch: &mut [f32],
    out: &mut [f32],
) {
    debug_assert!(p.is_depthwise(), "depthwise_conv2d: not depthwise");
    p.debug_check();
    debug_assert!(
        input.len() >= p.batch * p.c_in * p.h * p.w,
        "conv2d: input too short"
    );
    debug_assert!(
        weight.len() >= p.c_out * p.kh * p.kw,
        "conv2d: weight too short"
    );
    debug_assert!(
        bias.is_none_or(|b| b.len() >= p.c_out),
        "conv2d: bias too short"
    );
    debug_assert!(
        out.len() >= p.batch * p.c_out * p.out_h * p.out_w,
        "conv2d: out too short"
    );
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe { depthwise_neon(p, input, weight, bias, act, out) }
}

/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn depthwise_neon(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    let in_plane = p.h * p.w;
    let out_plane = p.out_h * p.out_w;
    let taps = p.kh * p.kw;
    if out_plane == 0 {
        return;
    }
    for n in 0..p.batch {
        for c in 0..p.c_out {
            let src = &input[(n * p.c_in + c) * in_plane..][..in_plane];
            let w = &weight[c * taps..][..taps];
            let dst = &mut out[(n * p.c_out + c) * out_plane..][..out_plane];
            let shift = bias.map_or(0.0, |b| b[c]);
            match p.kw {
                3 => plane::<3>(p, src, w, shift, act, dst),
                5 => plane::<5>(p, src, w, shift, act, dst),
                _ => plane::<0>(p, src, w, shift, act, dst),
            }
        }
    }
}

/// One output plane. `KW` is the kernel width when it is known at compile time, or 0 to read
/// it from `p`.
#[target_feature(enable = "neon")]
fn plane<const KW: usize>(
    p: &Conv2d,
    src: &[f32],
    w: &[f32],
    shift: f32,
    act: Activation,
    dst: &mut [f32],
) {
    let kw = if KW == 0 { p.kw } else { KW };
    let [sh, sw] = p.stride;
    let [dh, dw] = p.dilation;
    let [pt, pl, _, _] = p.pad;
    let span = kw.saturating_sub(1) * dw;
    // Outputs whose leftmost tap is in the image: ox * sw >= pl.
    let lo = pl.div_ceil(sw).min(p.out_w);
    // Outputs whose whole vector load stays inside the input row. A stride-2 `ld2` of four
    // outputs reads one element past the last tap, hence the extra `sw - 1`.
    let hi = if sw <= 2 {
        valid_range(p.out_w, p.w, pl, span + sw - 1, sw).end.max(lo)
    } else {
        lo
    };
    for (oy, row) in dst.chunks_exact_mut(p.out_w).enumerate() {
        let ky_ok = |ky: usize| {
            let y = oy * sh + ky * dh;
            y >= pt && y - pt < p.h
        };
        let input_row = |ky: usize| {
            let iy = oy * sh + ky * dh - pt;
            &src[iy * p.w..][..p.w]
        };
        // One output the slow way: every tap tested against the image.
        let scalar = |ox: usize| {
            let mut s = 0.0f32;
            for ky in (0..p.kh).filter(|&ky| ky_ok(ky)) {
                let line = input_row(ky);
                for kx in 0..kw {
                    let x = ox * sw + kx * dw;
                    if x >= pl && x - pl < p.w {
                        s += w[ky * kw + kx] * line[x - pl];
                    }
                }
            }
            s
        };
        for (ox, y) in row.iter_mut().enumerate().take(lo) {
            *y = scalar(ox);
        }
        let mut ox = lo;
        while ox + LANES <= hi {
            let mut acc = vdupq_n_f32(0.0);
            for ky in (0..p.kh).filter(|&ky| ky_ok(ky)) {
                let line = input_row(ky);
                let taps = &w[ky * kw..][..kw];
                for (kx, &wv) in taps.iter().enumerate() {
                    let ix = ox * sw + kx * dw - pl;
                    let v = if sw == 1 {
                        load(&line[ix..])
                    } else {
                        load_even(&line[ix..])
                    };
                    acc = vfmaq_n_f32(acc, v, wv);
                }
            }
            store(&mut row[ox..], acc);
            ox += LANES;
        }
        for (x, y) in row.iter_mut().enumerate().skip(ox) {
            *y = scalar(x);
        }
        epilogue(row, 1.0, shift, act);
    }
}
