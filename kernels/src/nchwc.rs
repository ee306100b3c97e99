//! The blocked channel layout, NCHW16c: an activation `[n, c, h, w]` stored as
//! `[n, ceil(c / 16), h, w, 16]`, so that the sixteen channels of one pixel are one cache line
//! and one AVX-512 vector (two AVX2 ones).
//!
//! Why blocked. In NCHW a convolution's output tile is a few channels (rows of `C`) times a
//! few dozen pixels, and every tile stores to, and reads its residual from, a dozen planes a
//! whole plane apart; its input is read either packed (a copy) or at a dozen strides at once.
//! In NCHW16c a tile is four blocks of sixteen channels times six pixels: its input is six
//! runs of sixteen contiguous channels per tap, its output four runs of six contiguous lines,
//! and the convolution needs neither im2col nor packing. onnxruntime's MLAS runs its CPU
//! convolutions this way (`MlasNchwcConv`), at 0.85-0.95 of the FMA peak on ResNet-50's
//! layers where kiln's GEMM-based ones run at 0.6-0.8 (docs/performance.md).
//!
//! One block size for every ISA: the layout is fixed when the model is compiled, the ISA is
//! chosen at run time, so 16 serves AVX-512 (one vector), AVX2 (two) and NEON (four) alike.
//! The channels past `c` in the last block are padding: the converters write zeros there, and
//! the kernels give them finite values (zero weights, zero bias, then the activation) that
//! every consumer ignores.
//!
//! This module has the layout's converters, the weight packer and the portable reference
//! convolution; the ISAs' kernels are the table's `conv2d_nchwc` entries.

use crate::len::holds;
use crate::{Activation, Conv2d};

/// Channels per block.
pub const BLOCK: usize = 16;

/// Blocks for `c` channels.
pub const fn blocks(c: usize) -> usize {
    c.div_ceil(BLOCK)
}

/// Floats of a blocked `[n, c, h, w]` tensor (the padding channels included).
pub const fn blocked_len(n: usize, c: usize, h: usize, w: usize) -> usize {
    n * blocks(c) * h * w * BLOCK
}

/// Floats of a convolution's weights packed by [`pack_weights`].
pub const fn packed_weight_len(c_out: usize, c_in: usize, kh: usize, kw: usize) -> usize {
    blocks(c_out) * blocks(c_in) * kh * kw * BLOCK * BLOCK
}

/// Pixels per tile of the converters: a tile of one block is `TILE x 16` floats (1 KiB), so
/// the sixteen planes are read in runs of a cache line each and the tile is written in L1.
/// (Lane by lane over whole planes, the first version wrote each 64-byte line sixteen times
/// a plane apart, and converting a 56x56x64 map cost more than a convolution gains.)
const TILE: usize = 16;

/// The converters' contract, shared by every table's pair: the NCHW side (`nchw` floats) holds
/// `[n, c, h, w]` (the product not overflowing) and the blocked side (`blocked` floats) its
/// [`blocked_len`]. Panics, naming the converter `name`, if not.
#[track_caller]
pub(crate) fn check_conversion([n, c, h, w]: [usize; 4], nchw: usize, blocked: usize, name: &str) {
    assert!(
        holds(nchw, &[n, c, h, w]) && blocked >= blocked_len(n, c, h, w),
        "nchwc::{name}: short slice"
    );
}

/// NCHW `src` (`[n, c, h, w]`) into NCHW16c `dst` ([`blocked_len`]), the padding channels
/// zeroed.
pub fn to_blocked(n: usize, c: usize, h: usize, w: usize, src: &[f32], dst: &mut [f32]) {
    let plane = h * w;
    check_conversion([n, c, h, w], src.len(), dst.len(), "to_blocked");
    if blocked_len(n, c, h, w) == 0 {
        return;
    }
    for (i, img) in dst[..blocked_len(n, c, h, w)]
        .chunks_exact_mut(blocks(c) * plane * BLOCK)
        .enumerate()
    {
        for (cb, blk) in img.chunks_exact_mut(plane * BLOCK).enumerate() {
            let lanes = BLOCK.min(c - cb * BLOCK);
            let planes = &src[(i * c + cb * BLOCK) * plane..][..lanes * plane];
            for (t, tile) in blk.chunks_mut(TILE * BLOCK).enumerate() {
                let px0 = t * TILE;
                let len = tile.len() / BLOCK;
                for (l, src) in planes.chunks_exact(plane).enumerate() {
                    for (p, &v) in src[px0..px0 + len].iter().enumerate() {
                        tile[p * BLOCK + l] = v;
                    }
                }
                for px in tile.chunks_exact_mut(BLOCK) {
                    px[lanes..].fill(0.0);
                }
            }
        }
    }
}

/// NCHW16c `src` ([`blocked_len`]) back into NCHW `dst` (`[n, c, h, w]`), the padding
/// channels dropped.
pub fn from_blocked(n: usize, c: usize, h: usize, w: usize, src: &[f32], dst: &mut [f32]) {
    let plane = h * w;
    check_conversion([n, c, h, w], dst.len(), src.len(), "from_blocked");
    if blocked_len(n, c, h, w) == 0 {
        return;
    }
    for (i, img) in src[..blocked_len(n, c, h, w)]
        .chunks_exact(blocks(c) * plane * BLOCK)
        .enumerate()
    {
        for (cb, blk) in img.chunks_exact(plane * BLOCK).enumerate() {
            let lanes = BLOCK.min(c - cb * BLOCK);
            let planes = &mut dst[(i * c + cb * BLOCK) * plane..][..lanes * plane];
            for (t, tile) in blk.chunks(TILE * BLOCK).enumerate() {
                let px0 = t * TILE;
                let len = tile.len() / BLOCK;
                for (l, dst) in planes.chunks_exact_mut(plane).enumerate() {
                    for (p, d) in dst[px0..px0 + len].iter_mut().enumerate() {
                        *d = tile[p * BLOCK + l];
                    }
                }
            }
        }
    }
}

/// Winograd F(4x4, 3x3) in this layout: the load-time filter transform, the scratch it needs
/// and the portable kernel (the table's `conv2d_nchwc_winograd` is each ISA's version).
pub mod winograd {
    pub use crate::arch::portable::winograd_nchwc::{
        conv2d, filter_len, scratch_len, transform_filter,
    };
}

/// Output blocks whose packed weights are interleaved ([`pack_weights`]).
pub const GROUP: usize = 4;

/// Where weight `(o, i, y, x)` of a `[c_out, c_in, kh, kw]` convolution lies in the packed
/// weights ([`pack_weights`]).
#[inline(always)]
pub(crate) fn packed_at(
    c_out: usize,
    c_in: usize,
    kh: usize,
    kw: usize,
    [o, i, y, x]: [usize; 4],
) -> usize {
    let (ob, obs) = (o / BLOCK, blocks(c_out));
    // Group `ob / GROUP` of `g` blocks; the groups before it are whole.
    let first = ob - ob % GROUP;
    let g = GROUP.min(obs - first);
    let per_block = blocks(c_in) * kh * kw * BLOCK * BLOCK;
    let row = ((i / BLOCK * kh + y) * kw + x) * BLOCK + i % BLOCK;
    first * per_block + row * g * BLOCK + (ob - first) * BLOCK + o % BLOCK
}

/// OIHW weights (`[c_out, c_in, kh, kw]`) packed for the blocked convolution: groups of
/// [`GROUP`] output blocks (the last may have fewer), each
/// `[c_in / 16][kh][kw][16 in][GROUP x 16 out]` (blocks rounded up, padding zero), so the
/// kernel loads the 64 output channels of one input channel and tap (AVX-512's four vectors,
/// AVX2's eight) as one contiguous run, and a group's weights are one sequential stream.
pub fn pack_weights(c_out: usize, c_in: usize, kh: usize, kw: usize, w: &[f32], dst: &mut [f32]) {
    let len = packed_weight_len(c_out, c_in, kh, kw);
    assert!(
        holds(w.len(), &[c_out, c_in, kh, kw]) && dst.len() >= len,
        "nchwc::pack_weights: short slice"
    );
    let dst = &mut dst[..len];
    dst.fill(0.0);
    for o in 0..c_out {
        for i in 0..c_in {
            for y in 0..kh {
                for x in 0..kw {
                    dst[packed_at(c_out, c_in, kh, kw, [o, i, y, x])] =
                        w[((o * c_in + i) * kh + y) * kw + x];
                }
            }
        }
    }
}

/// Whether the blocked convolution computes `p`: one group, no dilation (any kernel size,
/// stride and padding).
pub fn supports(p: &Conv2d) -> bool {
    p.groups == 1 && p.dilation == [1, 1] && p.stride[0] > 0 && p.stride[1] > 0
}

/// Checks the operands of a blocked convolution; panics on a short slice or an unsupported
/// convolution (the kernels read through raw pointers sized by these).
pub(crate) fn check(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    out: &[f32],
) {
    assert!(
        supports(p),
        "nchwc::conv2d: unsupported convolution (groups, dilation or a zero stride)"
    );
    let out_len = blocked_len(p.batch, p.c_out, p.out_h, p.out_w);
    assert!(
        input.len() >= blocked_len(p.batch, p.c_in, p.h, p.w)
            && weight.len() >= packed_weight_len(p.c_out, p.c_in, p.kh, p.kw)
            && bias.is_none_or(|b| b.len() >= p.c_out)
            && residual.is_none_or(|r| r.len() >= out_len)
            && out.len() >= out_len
            // Every offset the kernels form fits an isize with room to spare.
            && blocked_len(p.batch, p.c_in.max(p.c_out), p.h.max(p.out_h), p.w.max(p.out_w))
                < isize::MAX as usize / 8,
        "nchwc::conv2d: short slice"
    );
}

/// The blocked convolution, portable reference: `out = act(conv(input, weight) + bias +
/// residual)`, with `input`, `residual` and `out` in NCHW16c and `weight` packed by
/// [`pack_weights`]. The reference the ISAs' kernels are tested against, and the table's
/// entry where no ISA has one.
pub fn conv2d(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    residual: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    check(p, input, weight, bias, residual, out);
    let (ibs, obs) = (blocks(p.c_in), blocks(p.c_out));
    let (plane_in, plane_out) = (p.h * p.w * BLOCK, p.out_h * p.out_w * BLOCK);
    let mut acc = [0.0f32; BLOCK];
    let mut w = [0.0f32; BLOCK];
    for n in 0..p.batch {
        for ob in 0..obs {
            for oy in 0..p.out_h {
                for ox in 0..p.out_w {
                    for (l, a) in acc.iter_mut().enumerate() {
                        let ch = ob * BLOCK + l;
                        *a = bias.map_or(0.0, |b| if ch < p.c_out { b[ch] } else { 0.0 });
                    }
                    for ib in 0..ibs {
                        let x_blk = &input[(n * ibs + ib) * plane_in..][..plane_in];
                        for ky in 0..p.kh {
                            let iy = (oy * p.stride[0] + ky).wrapping_sub(p.pad[0]);
                            if iy >= p.h {
                                continue;
                            }
                            for kx in 0..p.kw {
                                let ix = (ox * p.stride[1] + kx).wrapping_sub(p.pad[1]);
                                if ix >= p.w {
                                    continue;
                                }
                                let x = &x_blk[(iy * p.w + ix) * BLOCK..][..BLOCK];
                                for (i, &xv) in x.iter().enumerate() {
                                    let ch = ib * BLOCK + i;
                                    let at = |o| {
                                        let tap = [ob * BLOCK + o, ch, ky, kx];
                                        packed_at(p.c_out, p.c_in, p.kh, p.kw, tap)
                                    };
                                    // The sixteen outputs of input `ch` are one run.
                                    w.copy_from_slice(&weight[at(0)..][..BLOCK]);
                                    for (a, &wv) in acc.iter_mut().zip(&w) {
                                        *a += xv * wv;
                                    }
                                }
                            }
                        }
                    }
                    let at = (n * obs + ob) * plane_out + (oy * p.out_w + ox) * BLOCK;
                    for (l, &a) in acc.iter().enumerate() {
                        let r = residual.map_or(0.0, |r| r[at + l]);
                        out[at + l] = act.apply(a + r);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::XorShift;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn blocked_round_trip_pads_with_zeros() {
        let (n, c, h, w) = (2, 19, 3, 5);
        let src = XorShift::new(7).vec(n * c * h * w);
        let mut blocked = vec![f32::NAN; blocked_len(n, c, h, w)];
        to_blocked(n, c, h, w, &src, &mut blocked);
        // Channel 18 of image 1, pixel (2, 4), and a padding channel of the same pixel.
        let px = 2 * w + 4;
        assert_eq!(
            blocked[((blocks(c) + 1) * h * w + px) * BLOCK + 2],
            src[(c + 18) * h * w + px]
        );
        assert_eq!(blocked[((blocks(c) + 1) * h * w + px) * BLOCK + 3], 0.0);
        let mut back = vec![0.0; src.len()];
        from_blocked(n, c, h, w, &blocked, &mut back);
        assert_eq!(back, src);
    }

    /// Every element where the layout says, on planes of several converter tiles (the last
    /// one partial) and a partial last block.
    #[test]
    fn conversions_over_several_tiles() {
        let (n, c, h, w) = (2, 35, 6, 7);
        let plane = h * w;
        let src = XorShift::new(9).vec(n * c * plane);
        let mut blocked = vec![f32::NAN; blocked_len(n, c, h, w)];
        to_blocked(n, c, h, w, &src, &mut blocked);
        for i in 0..n {
            for ch in 0..blocks(c) * BLOCK {
                for px in 0..plane {
                    let at = ((i * blocks(c) + ch / BLOCK) * plane + px) * BLOCK + ch % BLOCK;
                    let want = if ch < c {
                        src[(i * c + ch) * plane + px]
                    } else {
                        0.0
                    };
                    assert_eq!(blocked[at].to_bits(), want.to_bits(), "{i} {ch} {px}");
                }
            }
        }
        let mut back = vec![f32::NAN; src.len()];
        from_blocked(n, c, h, w, &blocked, &mut back);
        assert_eq!(back, src);
    }

    /// The reference against the NCHW reference convolution, on shapes with partial blocks,
    /// strides, padding and a residual.
    #[test]
    fn reference_matches_nchw_conv() {
        for &(c_in, c_out, h, w, k, s, pad) in &[
            (3, 5, 7, 6, 3, 1, 1),
            (17, 33, 5, 9, 3, 2, 1),
            (16, 16, 4, 4, 1, 1, 0),
            (20, 40, 9, 8, 7, 2, 3),
        ] {
            check_against_nchw(
                c_in,
                c_out,
                h,
                w,
                k,
                s,
                pad,
                &mut |p, x, wt, b, r, act, y| conv2d(p, x, wt, b, r, act, y),
            );
        }
    }

    /// Runs `conv` (a blocked convolution) on random operands and compares it, converted back
    /// to NCHW, with the portable NCHW convolution plus the residual.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn check_against_nchw(
        c_in: usize,
        c_out: usize,
        h: usize,
        w: usize,
        k: usize,
        s: usize,
        pad: usize,
        conv: &mut dyn FnMut(
            &Conv2d,
            &[f32],
            &[f32],
            Option<&[f32]>,
            Option<&[f32]>,
            Activation,
            &mut [f32],
        ),
    ) {
        let batch = 2;
        let out_h = (h + 2 * pad - k) / s + 1;
        let out_w = (w + 2 * pad - k) / s + 1;
        let p = Conv2d {
            batch,
            c_in,
            h,
            w,
            c_out,
            kh: k,
            kw: k,
            stride: [s, s],
            dilation: [1, 1],
            pad: [pad; 4],
            groups: 1,
            out_h,
            out_w,
        };
        let mut rng = XorShift::new((c_in * 131 + c_out * 7 + h * 3 + k) as u32);
        let mut rand = |len: usize| -> Vec<f32> { rng.vec(len) };
        let x = rand(batch * c_in * h * w);
        let wt = rand(c_out * c_in * k * k);
        let bias = rand(c_out);
        let res = rand(batch * c_out * out_h * out_w);
        let mut want = vec![0.0; res.len()];
        let mut scratch = vec![0.0; p.scratch_len()];
        crate::conv2d(
            &p,
            &x,
            &wt,
            Some(&bias),
            Activation::None,
            &mut scratch,
            &mut want,
        );
        for (y, r) in want.iter_mut().zip(&res) {
            *y = Activation::Relu.apply(*y + r);
        }
        let mut xb = vec![0.0; blocked_len(batch, c_in, h, w)];
        to_blocked(batch, c_in, h, w, &x, &mut xb);
        let mut rb = vec![0.0; blocked_len(batch, c_out, out_h, out_w)];
        to_blocked(batch, c_out, out_h, out_w, &res, &mut rb);
        let mut wp = vec![0.0; packed_weight_len(c_out, c_in, k, k)];
        pack_weights(c_out, c_in, k, k, &wt, &mut wp);
        let mut yb = vec![f32::NAN; rb.len()];
        conv(
            &p,
            &xb,
            &wp,
            Some(&bias),
            Some(&rb),
            Activation::Relu,
            &mut yb,
        );
        let mut got = vec![0.0; want.len()];
        from_blocked(batch, c_out, out_h, out_w, &yb, &mut got);
        // Both sums are f32 in different orders (up to 980 terms): 1e-4 of the data's scale.
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * w.abs().max(1.0),
                "element {i}: {g} vs {w}"
            );
        }
    }
}
