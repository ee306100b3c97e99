//! NEON 2-D convolution ([`conv2d`]): the portable kernel's contract and routing, with the
//! NEON GEMM (bias and activation fused into its write-back) and depthwise kernels underneath.
//!
//! Algorithm sketch. The strategy is chosen by exactly the conditions of
//! [`Conv2d::scratch_len`], in the same order, so the scratch the planner reserved (the same
//! for every ISA) always suffices:
//!
//! 1. **Pointwise** (1x1, stride 1, no padding): the input planes of a group are already the
//!    `[c_in/g, h*w]` right-hand matrix, so each (image, group) is one
//!    `gemm_fused(c_out/g, h*w, c_in/g)` straight into the output, no copy.
//! 2. **Depthwise** (one input and one output channel per group): direct SIMD loops in
//!    `depthwise.rs`.
//! 3. **General**: im2col one (image, group) into the scratch as the
//!    `[c_in/g * kh * kw, out_h * out_w]` matrix (padding as explicit zeros), then
//!    `gemm_fused(c_out/g, out_h*out_w, c_in/g*kh*kw)` with the group's weights, which already
//!    are `[c_out/g, c_in/g*kh*kw]` row-major. The GEMM packs its operands itself, so the
//!    scratch is the only extra memory, reused for every group and image.

use super::depthwise::depthwise_conv2d;
use super::gemm::gemm_fused;
use crate::{Activation, Conv2d};
use core::ops::Range;

/// Convolution. `weight` is `[c_out, c_in/groups, kh, kw]`, `bias` is `[c_out]`, `input` is
/// `[batch, c_in, h, w]`, `out` is `[batch, c_out, out_h, out_w]`; padding reads zeros and the
/// activation is applied after the bias. `scratch` needs [`Conv2d::scratch_len`] elements; its
/// contents on entry do not matter.
pub(crate) fn conv2d(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    conv2d_any(p, input, weight, bias, None, act, scratch, out);
}

/// [`crate::conv2d_res`]: [`conv2d`] with a residual operand added in the GEMM's epilogue.
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the residual.
pub(crate) fn conv2d_res(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    residual: &[f32],
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    p.check_residual(residual);
    conv2d_any(p, input, weight, bias, Some(residual), act, scratch, out);
}

#[allow(clippy::too_many_arguments)] // conv2d's contract plus the residual.
fn conv2d_any(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    res: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    p.check_operands(input, weight, bias, out);
    assert!(
        scratch.len() >= p.scratch_len(),
        "conv2d: scratch too short"
    );
    if !p.is_pointwise() && p.is_depthwise() {
        // The depthwise kernels have no residual epilogue (the compiler never fuses one
        // there): the residual and the activation are a second pass.
        let act_now = if res.is_some() { Activation::None } else { act };
        depthwise_conv2d(p, input, weight, bias, act_now, scratch, out);
        if let Some(r) = res {
            crate::arch::portable::epilogue::add_residual(p, out, r, act);
        }
        return;
    }
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe { conv2d_neon(p, input, weight, bias, res, act, scratch, out) }
}

/// The pointwise and im2col strategies.
///
/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the residual.
unsafe fn conv2d_neon(
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
    let k = cig * p.kh * p.kw;
    debug_assert!(
        input.len() >= p.batch * p.c_in * in_plane,
        "conv2d: input too short"
    );
    debug_assert!(weight.len() >= p.c_out * k, "conv2d: weight too short");
    debug_assert!(
        bias.is_none_or(|b| b.len() >= p.c_out),
        "conv2d: bias too short"
    );
    debug_assert!(
        out.len() >= p.batch * p.c_out * out_plane,
        "conv2d: out too short"
    );
    if out_plane == 0 {
        return;
    }
    let group_bias = |g: usize| bias.map(|b| &b[g * cog..(g + 1) * cog]);
    let group_res = |n: usize, g: usize| {
        res.map(|r| &r[(n * p.c_out + g * cog) * out_plane..][..cog * out_plane])
    };
    if p.is_pointwise() {
        debug_assert!(p.out_h == p.h && p.out_w == p.w, "conv2d: 1x1 output size");
        for n in 0..p.batch {
            for g in 0..p.groups {
                let src = &input[(n * p.c_in + g * cig) * in_plane..][..cig * in_plane];
                let w = &weight[g * cog * k..][..cog * k];
                let dst = &mut out[(n * p.c_out + g * cog) * out_plane..][..cog * out_plane];
                gemm_fused(
                    cog,
                    out_plane,
                    cig,
                    w,
                    src,
                    dst,
                    group_bias(g),
                    group_res(n, g),
                    act,
                );
            }
        }
    } else {
        let cols = &mut scratch[..k * out_plane];
        for n in 0..p.batch {
            for g in 0..p.groups {
                let src = &input[(n * p.c_in + g * cig) * in_plane..][..cig * in_plane];
                im2col(p, cig, src, cols);
                let w = &weight[g * cog * k..][..cog * k];
                let dst = &mut out[(n * p.c_out + g * cog) * out_plane..][..cog * out_plane];
                gemm_fused(
                    cog,
                    out_plane,
                    k,
                    w,
                    cols,
                    dst,
                    group_bias(g),
                    group_res(n, g),
                    act,
                );
            }
        }
    }
}

/// Output positions `o` in `0..out_len` for which the input coordinate
/// `o * stride + offset - pad` lies in `0..in_len` (`offset` is the tap's dilated offset).
/// The coordinate grows with `o`, so the valid positions form one range.
pub(super) fn valid_range(
    out_len: usize,
    in_len: usize,
    pad: usize,
    offset: usize,
    stride: usize,
) -> Range<usize> {
    // o * stride + offset >= pad  <=>  o >= ceil((pad - offset) / stride).
    let lo = pad.saturating_sub(offset).div_ceil(stride);
    // o * stride + offset < in_len + pad  <=>  o < ceil((in_len + pad - offset) / stride).
    let hi = (in_len + pad).saturating_sub(offset).div_ceil(stride);
    let hi = hi.min(out_len);
    lo.min(hi)..hi
}

/// Writes the im2col matrix of one (image, group): `cols[(ci, ky, kx), (oy, ox)]` is the input
/// element under tap `(ky, kx)` of output `(oy, ox)` in channel `ci`, or 0 in the padding.
/// Pure data movement: contiguous copies for stride 1, a gather otherwise.
fn im2col(p: &Conv2d, cig: usize, src: &[f32], cols: &mut [f32]) {
    let [sh, sw] = p.stride;
    let [dh, dw] = p.dilation;
    let [pt, pl, _, _] = p.pad;
    let in_plane = p.h * p.w;
    let out_plane = p.out_h * p.out_w;
    let mut rows = cols.chunks_exact_mut(out_plane);
    for ci in 0..cig {
        let plane = &src[ci * in_plane..][..in_plane];
        for ky in 0..p.kh {
            let ys = valid_range(p.out_h, p.h, pt, ky * dh, sh);
            for kx in 0..p.kw {
                let xs = valid_range(p.out_w, p.w, pl, kx * dw, sw);
                // Exactly cig * kh * kw rows were sliced for us.
                let Some(row) = rows.next() else { return };
                for (oy, line) in row.chunks_exact_mut(p.out_w).enumerate() {
                    if !ys.contains(&oy) || xs.is_empty() {
                        line.fill(0.0);
                        continue;
                    }
                    let iy = oy * sh + ky * dh - pt;
                    let ix0 = xs.start * sw + kx * dw - pl;
                    let input_row = &plane[iy * p.w..][..p.w];
                    line[..xs.start].fill(0.0);
                    line[xs.end..].fill(0.0);
                    let dst = &mut line[xs.clone()];
                    if sw == 1 {
                        dst.copy_from_slice(&input_row[ix0..ix0 + dst.len()]);
                    } else {
                        for (d, &s) in dst.iter_mut().zip(input_row[ix0..].iter().step_by(sw)) {
                            *d = s;
                        }
                    }
                }
            }
        }
    }
}

/// The portable [`winograd::conv2d`](crate::winograd::conv2d) with the NEON GEMM for the 36
/// products (NEON is aarch64's baseline, so the transforms vectorise without a
/// `#[target_feature]`).
pub(crate) fn conv2d_winograd(
    p: &Conv2d,
    input: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    use crate::arch::portable::winograd::{conv2d_with, Plain};
    // Single-threaded: the tables' `_par` entries are x86-only so far (`Kernels::conv2d_on`).
    conv2d_with::<Plain>(
        super::gemm::gemm,
        &crate::par::Serial,
        p,
        input,
        u,
        bias,
        act,
        scratch,
        out,
    );
}
