//! Transposed convolution (ONNX `ConvTranspose`, PyTorch `ConvTranspose1d/2d/3d`) over 1 to 3
//! spatial dimensions, written once in 3-D (lower ranks have leading sizes of 1).
//!
//! Algorithm sketch, GEMM + col2im (the adjoint of the convolution's im2col + GEMM):
//!
//! * For each (image, group), transpose the group's input planes `[c_in/g, d*h*w]` into the
//!   scratch as `xt[d*h*w, c_in/g]`.
//! * `gemm(d*h*w, c_out/g * kd*kh*kw, c_in/g)` of `xt` with the group's weights, which already
//!   are the row-major `[c_in/g, c_out/g * kd*kh*kw]` right operand, gives `cols`: for every
//!   input pixel, what it contributes to each output channel under each kernel tap.
//! * col2im: the output starts as the bias, then every input pixel adds each tap's column to
//!   output `i * stride + tap * dilation - pad_begin` (per axis). For each tap the input
//!   positions whose target lies inside the output form one range per axis (`valid_range`, with
//!   input and output swapped), so the scatter loops have no per-element bounds test.
//!
//! All multiply-adds run in the caller's GEMM (the `Kernels` table's SIMD one); the scatter is
//! additions only. Output positions no tap reaches (`output_padding`, large strides) keep the
//! bias.

use super::conv::valid_range;
use super::matmul::GemmFn;
use crate::ConvTranspose;

/// Transposed convolution: `x` is `[batch, c_in, d, h, w]`, `weight` `[c_in, c_out/groups, kd,
/// kh, kw]` (ONNX's and PyTorch's layout), `bias` `[c_out]`, `y` `[batch, c_out, od, oh, ow]`.
/// `scratch` needs [`ConvTranspose::scratch_len`] elements (contents irrelevant); `gemm` is
/// `Kernels::gemm` (see [`GemmFn`](crate::GemmFn)).
pub fn conv_transpose(
    p: &ConvTranspose,
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    scratch: &mut [f32],
    y: &mut [f32],
    gemm: GemmFn,
) {
    debug_assert!(p.groups > 0, "conv_transpose: groups is 0");
    debug_assert!(
        p.c_in.is_multiple_of(p.groups) && p.c_out.is_multiple_of(p.groups),
        "conv_transpose: bad groups"
    );
    debug_assert!(
        p.stride.iter().chain(&p.dilation).all(|&s| s > 0),
        "conv_transpose: zero stride or dilation"
    );
    let cig = p.c_in / p.groups;
    let cog = p.c_out / p.groups;
    let taps = p.k[0] * p.k[1] * p.k[2];
    let in_vol = p.input[0] * p.input[1] * p.input[2];
    let out_vol = p.out[0] * p.out[1] * p.out[2];
    let row = cog * taps;
    debug_assert!(
        x.len() >= p.batch * p.c_in * in_vol,
        "conv_transpose: x too short"
    );
    debug_assert!(
        weight.len() >= p.c_in * row,
        "conv_transpose: weight too short"
    );
    debug_assert!(
        bias.is_none_or(|b| b.len() >= p.c_out),
        "conv_transpose: bias too short"
    );
    debug_assert!(
        scratch.len() >= p.scratch_len(),
        "conv_transpose: scratch too short"
    );
    debug_assert!(
        y.len() >= p.batch * p.c_out * out_vol,
        "conv_transpose: y too short"
    );
    if out_vol == 0 {
        return;
    }
    let (xt, rest) = scratch.split_at_mut(in_vol * cig);
    let cols = &mut rest[..in_vol * row];
    for n in 0..p.batch {
        for g in 0..p.groups {
            let src = &x[(n * p.c_in + g * cig) * in_vol..][..cig * in_vol];
            let w = &weight[g * cig * row..][..cig * row];
            let dst = &mut y[(n * p.c_out + g * cog) * out_vol..][..cog * out_vol];
            for (c, plane) in src.chunks_exact(in_vol).enumerate() {
                for (i, &v) in plane.iter().enumerate() {
                    xt[i * cig + c] = v;
                }
            }
            gemm(in_vol, row, cig, xt, w, cols);
            for (c, vol) in dst.chunks_exact_mut(out_vol).enumerate() {
                vol.fill(bias.map_or(0.0, |b| b[g * cog + c]));
            }
            col2im(p, cog, cols, dst);
        }
    }
}

/// Adds `cols[(iz, iy, ix), (co, kz, ky, kx)]` into `dst[co, oz, oy, ox]` for every tap whose
/// target `i * stride + k * dilation - pad` lies inside the output.
fn col2im(p: &ConvTranspose, cog: usize, cols: &[f32], dst: &mut [f32]) {
    let [_, ih, iw] = p.input;
    let [od, oh, ow] = p.out;
    let [kd, kh, kw] = p.k;
    let taps = kd * kh * kw;
    let row = cog * taps;
    let out_vol = od * oh * ow;
    // Input positions whose target along `axis` under tap `t` is inside the output.
    let range = |axis: usize, t: usize| {
        valid_range(
            p.input[axis],
            p.out[axis],
            p.pad[axis],
            t * p.dilation[axis],
            p.stride[axis],
        )
    };
    for co in 0..cog {
        let vol = &mut dst[co * out_vol..][..out_vol];
        for tz in 0..kd {
            let rz = range(0, tz);
            for ty in 0..kh {
                let ry = range(1, ty);
                for tx in 0..kw {
                    let rx = range(2, tx);
                    let col = co * taps + (tz * kh + ty) * kw + tx;
                    for iz in rz.clone() {
                        let oz = iz * p.stride[0] + tz * p.dilation[0] - p.pad[0];
                        for iy in ry.clone() {
                            let oy = iy * p.stride[1] + ty * p.dilation[1] - p.pad[1];
                            let base = (oz * oh + oy) * ow;
                            let src = ((iz * ih + iy) * iw) * row + col;
                            for ix in rx.clone() {
                                let ox = ix * p.stride[2] + tx * p.dilation[2] - p.pad[2];
                                vol[base + ox] += cols[src + ix * row];
                            }
                        }
                    }
                }
            }
        }
    }
}
