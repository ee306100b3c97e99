//! Pooling: [`max_pool2d`], [`avg_pool2d`] and [`global_avg_pool`] over NCHW data.
//!
//! Algorithm sketch. For output `(oy, ox)` the window covers padded coordinates
//! `oy*sh .. oy*sh + kh` (likewise for columns). Clipping it to the real input once per output
//! row/column gives plain loops with no per-element bounds test:
//!
//! * max: the maximum over the clipped window; padding never wins because it is never read
//!   (a window lying entirely in the padding yields `-inf`);
//! * average: the sum over the clipped window divided by the number of real elements, or, with
//!   `count_include_pad`, by the window clipped to the *padded* input (ONNX Runtime and PyTorch
//!   semantics: positions past the bottom/right padding, which ceil-mode outputs can reach, are
//!   never counted). An empty window yields 0 rather than 0/0.
//!
//! Global average pooling is a mean per channel plane, summed with eight partial sums for
//! speed and accuracy.

use crate::Pool2d;
use core::ops::Range;

/// The window of output `o` clipped to the input, as input coordinates, and its length clipped
/// to the padded input (`pad_before + in_len + pad_after`).
fn window(
    o: usize,
    stride: usize,
    k: usize,
    pad_before: usize,
    in_len: usize,
    pad_after: usize,
) -> (Range<usize>, usize) {
    let start = o * stride;
    let end = start + k;
    let padded_end = end.min(pad_before + in_len + pad_after);
    let padded_len = padded_end.saturating_sub(start);
    let lo = start.max(pad_before).min(pad_before + in_len) - pad_before;
    let hi = end.min(pad_before + in_len).max(pad_before) - pad_before;
    (lo..hi.max(lo), padded_len)
}

fn check_lengths(p: &Pool2d, input: &[f32], out: &[f32], what: &str) {
    debug_assert!(p.stride[0] > 0 && p.stride[1] > 0, "{what}: zero stride");
    debug_assert!(
        input.len() >= p.batch * p.channels * p.h * p.w,
        "{what}: input too short"
    );
    debug_assert!(
        out.len() >= p.batch * p.channels * p.out_h * p.out_w,
        "{what}: out too short"
    );
}

/// Applies `reduce(plane, rows, cols, padded_count)` to every output position of every plane.
fn pool_planes(
    p: &Pool2d,
    input: &[f32],
    out: &mut [f32],
    reduce: impl Fn(&[f32], Range<usize>, Range<usize>, usize) -> f32,
) {
    let in_plane = p.h * p.w;
    let out_plane = p.out_h * p.out_w;
    if out_plane == 0 {
        return;
    }
    let [pt, pl, pb, pr] = p.pad;
    let planes = out[..p.batch * p.channels * out_plane].chunks_exact_mut(out_plane);
    for (i, dst) in planes.enumerate() {
        let src = &input[i * in_plane..(i + 1) * in_plane];
        for (oy, line) in dst.chunks_exact_mut(p.out_w).enumerate() {
            let (rows, ph) = window(oy, p.stride[0], p.kh, pt, p.h, pb);
            for (ox, y) in line.iter_mut().enumerate() {
                let (cols, pw) = window(ox, p.stride[1], p.kw, pl, p.w, pr);
                *y = reduce(src, rows.clone(), cols, ph * pw);
            }
        }
    }
}

/// Max pooling. Padding never wins: it is treated as `-inf`.
pub fn max_pool2d(p: &Pool2d, input: &[f32], out: &mut [f32]) {
    check_lengths(p, input, out, "max_pool2d");
    let w = p.w;
    pool_planes(p, input, out, |src, rows, cols, _| {
        let mut m = f32::NEG_INFINITY;
        for iy in rows {
            for &x in &src[iy * w + cols.start..iy * w + cols.end] {
                // A NaN input propagates (`f32::max` and a bare `x > m` would both drop it).
                if x > m || x.is_nan() {
                    m = x;
                }
            }
        }
        m
    });
}

/// Average pooling; see [`Pool2d::count_include_pad`] for the divisor.
pub fn avg_pool2d(p: &Pool2d, input: &[f32], out: &mut [f32]) {
    check_lengths(p, input, out, "avg_pool2d");
    let w = p.w;
    let include_pad = p.count_include_pad;
    pool_planes(p, input, out, |src, rows, cols, padded_count| {
        let count = if include_pad {
            padded_count
        } else {
            rows.len() * cols.len()
        };
        if count == 0 {
            return 0.0;
        }
        let mut s = 0.0f32;
        for iy in rows {
            for &x in &src[iy * w + cols.start..iy * w + cols.end] {
                s += x;
            }
        }
        s / count as f32
    });
}

/// Sum of a slice with eight partial sums (vectorisable, and more accurate than one chain).
fn sum(data: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks = data.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().sum();
    for c in chunks {
        for (s, &x) in acc.iter_mut().zip(c) {
            *s += x;
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// `out[n, c] = mean(input[n, c, :])` over `spatial` elements (0 if `spatial` is 0).
pub fn global_avg_pool(
    batch: usize,
    channels: usize,
    spatial: usize,
    input: &[f32],
    out: &mut [f32],
) {
    debug_assert!(
        input.len() >= batch * channels * spatial,
        "global_avg_pool: input too short"
    );
    debug_assert!(
        out.len() >= batch * channels,
        "global_avg_pool: out too short"
    );
    if spatial == 0 {
        out[..batch * channels].fill(0.0);
        return;
    }
    let planes = input[..batch * channels * spatial].chunks_exact(spatial);
    for (y, plane) in out.iter_mut().zip(planes) {
        *y = sum(plane) / spatial as f32;
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::testutil::{assert_close, XorShift};
    use std::vec;
    use std::vec::Vec;

    /// Every output visits every window position in padded coordinates and tests it against
    /// the input bounds one element at a time.
    fn naive_pool(p: &Pool2d, input: &[f32], max: bool) -> Vec<f64> {
        let mut out = Vec::new();
        for n in 0..p.batch {
            for c in 0..p.channels {
                for oy in 0..p.out_h {
                    for ox in 0..p.out_w {
                        let mut m = f64::NEG_INFINITY;
                        let mut s = 0.0f64;
                        let mut real = 0usize;
                        let mut padded = 0usize;
                        for ky in 0..p.kh {
                            for kx in 0..p.kw {
                                let py = oy * p.stride[0] + ky;
                                let px = ox * p.stride[1] + kx;
                                let in_padded = py < p.pad[0] + p.h + p.pad[2]
                                    && px < p.pad[1] + p.w + p.pad[3];
                                if in_padded {
                                    padded += 1;
                                }
                                let iy = py as isize - p.pad[0] as isize;
                                let ix = px as isize - p.pad[1] as isize;
                                if iy < 0 || ix < 0 || iy >= p.h as isize || ix >= p.w as isize {
                                    continue;
                                }
                                let x = f64::from(
                                    input[((n * p.channels + c) * p.h + iy as usize) * p.w
                                        + ix as usize],
                                );
                                m = m.max(x);
                                s += x;
                                real += 1;
                            }
                        }
                        let count = if p.count_include_pad { padded } else { real };
                        out.push(if max {
                            m
                        } else if count == 0 {
                            0.0
                        } else {
                            s / count as f64
                        });
                    }
                }
            }
        }
        out
    }

    fn out_len(input: usize, k: usize, stride: usize, pads: usize, ceil: bool) -> usize {
        let span = input + pads - k;
        (if ceil {
            span.div_ceil(stride)
        } else {
            span / stride
        }) + 1
    }

    #[allow(clippy::too_many_arguments)]
    fn params(
        batch: usize,
        channels: usize,
        hw: [usize; 2],
        k: [usize; 2],
        stride: [usize; 2],
        pad: [usize; 4],
        ceil: bool,
        count_include_pad: bool,
    ) -> Pool2d {
        Pool2d {
            batch,
            channels,
            h: hw[0],
            w: hw[1],
            kh: k[0],
            kw: k[1],
            stride,
            pad,
            out_h: out_len(hw[0], k[0], stride[0], pad[0] + pad[2], ceil),
            out_w: out_len(hw[1], k[1], stride[1], pad[1] + pad[3], ceil),
            count_include_pad,
        }
    }

    fn configs() -> Vec<Pool2d> {
        let mut v = Vec::new();
        for include in [false, true] {
            v.push(params(1, 1, [4, 4], [2, 2], [2, 2], [0; 4], false, include));
            v.push(params(2, 3, [7, 9], [3, 3], [2, 2], [1; 4], false, include));
            v.push(params(
                2,
                2,
                [9, 7],
                [3, 2],
                [1, 2],
                [1, 0, 2, 1],
                false,
                include,
            ));
            v.push(params(1, 3, [8, 8], [3, 3], [2, 2], [0; 4], true, include));
            v.push(params(
                1,
                2,
                [7, 5],
                [3, 3],
                [3, 2],
                [1, 1, 1, 1],
                true,
                include,
            ));
            v.push(params(
                2,
                2,
                [5, 6],
                [5, 4],
                [1, 1],
                [2, 2, 2, 2],
                false,
                include,
            ));
        }
        v
    }

    #[test]
    fn max_pool_hand_computed_ramp() {
        // 4x4 ramp 0..16, 2x2 windows, stride 2: the bottom-right element of each window.
        let p = params(1, 1, [4, 4], [2, 2], [2, 2], [0; 4], false, false);
        let input: Vec<f32> = (0..16).map(|i| i as f32).collect();
        let mut out = [f32::NAN; 4];
        max_pool2d(&p, &input, &mut out);
        assert_eq!(out, [5.0, 7.0, 13.0, 15.0]);
    }

    #[test]
    fn max_pool_padding_never_wins() {
        // All inputs negative with padding 1: a zero pad value would win everywhere.
        let p = params(1, 1, [2, 2], [2, 2], [1, 1], [1; 4], false, false);
        let mut out = [f32::NAN; 9];
        max_pool2d(&p, &[-1.0, -2.0, -3.0, -4.0], &mut out);
        assert_eq!(out, [-1.0, -1.0, -2.0, -1.0, -1.0, -2.0, -3.0, -3.0, -4.0]);
    }

    #[test]
    fn avg_pool_hand_computed_padding_divisors() {
        // 2x2 of ones, 2x2 windows, stride 1, padding 1: the corner window holds one real
        // element; excluding padding that averages to 1, including it to 1/4.
        let ones = [1.0; 4];
        let mut out = [f32::NAN; 9];
        let p = params(1, 1, [2, 2], [2, 2], [1, 1], [1; 4], false, false);
        avg_pool2d(&p, &ones, &mut out);
        assert_eq!(out, [1.0; 9]);
        let p = params(1, 1, [2, 2], [2, 2], [1, 1], [1; 4], false, true);
        avg_pool2d(&p, &ones, &mut out);
        assert_eq!(out, [0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25]);
        // Ceil mode: 3x3 input, 2x2 windows, stride 2, no padding -> the last window hangs
        // over the edge; it is not padding, so it is never counted.
        let p = params(1, 1, [3, 3], [2, 2], [2, 2], [0; 4], true, true);
        let mut out = [f32::NAN; 4];
        avg_pool2d(&p, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0], &mut out);
        assert_eq!(out, [3.0, 4.5, 7.5, 9.0]);
    }

    #[test]
    fn max_pool_matches_naive() {
        let mut rng = XorShift::new(17);
        for p in configs() {
            let input = rng.vec(p.batch * p.channels * p.h * p.w);
            let mut out = vec![f32::NAN; p.batch * p.channels * p.out_h * p.out_w];
            max_pool2d(&p, &input, &mut out);
            assert_close(&out, &naive_pool(&p, &input, true), &std::format!("{p:?}"));
        }
    }

    #[test]
    fn avg_pool_matches_naive() {
        let mut rng = XorShift::new(19);
        for p in configs() {
            let input = rng.vec(p.batch * p.channels * p.h * p.w);
            let mut out = vec![f32::NAN; p.batch * p.channels * p.out_h * p.out_w];
            avg_pool2d(&p, &input, &mut out);
            assert_close(&out, &naive_pool(&p, &input, false), &std::format!("{p:?}"));
        }
    }

    #[test]
    fn global_avg_pool_matches_naive() {
        let mut rng = XorShift::new(23);
        for (batch, channels, spatial) in [(1, 1, 1), (2, 3, 7), (1, 4, 49), (2, 2, 1000)] {
            let input = rng.vec(batch * channels * spatial);
            let mut out = vec![f32::NAN; batch * channels];
            global_avg_pool(batch, channels, spatial, &input, &mut out);
            let want: Vec<f64> = (0..batch * channels)
                .map(|i| {
                    let plane = &input[i * spatial..(i + 1) * spatial];
                    plane.iter().map(|&x| f64::from(x)).sum::<f64>() / spatial as f64
                })
                .collect();
            assert_close(&out, &want, "global_avg_pool");
        }
        let mut out = [f32::NAN; 2];
        global_avg_pool(1, 2, 3, &[1.0, 2.0, 3.0, 10.0, 20.0, 60.0], &mut out);
        assert_eq!(out, [2.0, 30.0]);
    }
}
