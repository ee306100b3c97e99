//! Data movement: channel concatenation ([`copy_into_channels`]) and constant padding
//! ([`pad2d`]).
//!
//! Algorithm sketch. In NCHW a channel range of one image is one contiguous run, so a concat
//! is one `copy_from_slice` per image (the compiler calls this once per concat input, each at
//! its channel offset). Padding writes each output plane row by row: whole fill rows at the
//! top and bottom, and for the rows in between a left fill, a copy of the input row and a
//! right fill.

/// Concatenation on channels: for each image `n`,
/// `dst[n, c_offset..c_offset + c_src, :] = src[n, :, :]`. `dst` has `c_dst` channels.
pub fn copy_into_channels(
    batch: usize,
    c_src: usize,
    spatial: usize,
    src: &[f32],
    c_dst: usize,
    c_offset: usize,
    dst: &mut [f32],
) {
    let run = c_src * spatial;
    debug_assert!(
        c_offset + c_src <= c_dst,
        "copy_into_channels: channels out of range"
    );
    debug_assert!(
        src.len() >= batch * run,
        "copy_into_channels: src too short"
    );
    debug_assert!(
        dst.len() >= batch * c_dst * spatial,
        "copy_into_channels: dst too short"
    );
    for n in 0..batch {
        let at = (n * c_dst + c_offset) * spatial;
        dst[at..at + run].copy_from_slice(&src[n * run..(n + 1) * run]);
    }
}

/// Constant padding of the two spatial dimensions: `out` is
/// `[batch, channels, h + top + bottom, w + left + right]` with `pad = [top, left, bottom,
/// right]`, the input in the middle and `value` everywhere else.
#[allow(clippy::too_many_arguments)] // The signature is the contract generated code calls.
pub fn pad2d(
    batch: usize,
    channels: usize,
    h: usize,
    w: usize,
    pad: [usize; 4],
    value: f32,
    input: &[f32],
    out: &mut [f32],
) {
    let [top, left, bottom, right] = pad;
    let out_w = w + left + right;
    let out_plane = (h + top + bottom) * out_w;
    let planes = batch * channels;
    debug_assert!(input.len() >= planes * h * w, "pad2d: input too short");
    debug_assert!(out.len() >= planes * out_plane, "pad2d: out too short");
    if out_plane == 0 {
        return;
    }
    for (i, dst) in out[..planes * out_plane]
        .chunks_exact_mut(out_plane)
        .enumerate()
    {
        let src = &input[i * h * w..(i + 1) * h * w];
        let (head, rest) = dst.split_at_mut(top * out_w);
        let (body, tail) = rest.split_at_mut(h * out_w);
        head.fill(value);
        tail.fill(value);
        for (y, line) in body.chunks_exact_mut(out_w).enumerate() {
            line[..left].fill(value);
            line[left..left + w].copy_from_slice(&src[y * w..(y + 1) * w]);
            line[left + w..].fill(value);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::testutil::XorShift;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn copy_into_channels_builds_a_concat() {
        // Two images; a has 1 channel, b has 2, spatial 2: concat is [a0 b0 b0', a1 b1 b1'].
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [10.0, 11.0, 12.0, 13.0, 20.0, 21.0, 22.0, 23.0];
        let mut dst = [f32::NAN; 12];
        copy_into_channels(2, 1, 2, &a, 3, 0, &mut dst);
        copy_into_channels(2, 2, 2, &b, 3, 1, &mut dst);
        assert_eq!(
            dst,
            [1.0, 2.0, 10.0, 11.0, 12.0, 13.0, 3.0, 4.0, 20.0, 21.0, 22.0, 23.0]
        );
    }

    #[test]
    fn copy_into_channels_matches_naive() {
        let mut rng = XorShift::new(59);
        let (batch, spatial, c_dst) = (3, 5, 7);
        for (c_src, c_offset) in [(7, 0), (3, 0), (2, 3), (1, 6)] {
            let src = rng.vec(batch * c_src * spatial);
            let mut dst = vec![-9.0f32; batch * c_dst * spatial];
            copy_into_channels(batch, c_src, spatial, &src, c_dst, c_offset, &mut dst);
            for n in 0..batch {
                for c in 0..c_dst {
                    for s in 0..spatial {
                        let got = dst[(n * c_dst + c) * spatial + s];
                        let want = if c >= c_offset && c < c_offset + c_src {
                            src[(n * c_src + c - c_offset) * spatial + s]
                        } else {
                            -9.0 // untouched
                        };
                        assert_eq!(got, want, "c_src {c_src} offset {c_offset} at {n},{c},{s}");
                    }
                }
            }
        }
    }

    #[test]
    fn pad2d_hand_computed() {
        // 1x2 input [1, 2], pad top 1, left 0, bottom 0, right 1 with 9.
        let mut out = [f32::NAN; 6];
        pad2d(1, 1, 1, 2, [1, 0, 0, 1], 9.0, &[1.0, 2.0], &mut out);
        assert_eq!(out, [9.0, 9.0, 9.0, 1.0, 2.0, 9.0]);
    }

    #[test]
    fn pad2d_matches_naive() {
        let mut rng = XorShift::new(61);
        for (batch, channels, h, w, pad) in [
            (1, 1, 1, 1, [0; 4]),
            (2, 3, 4, 5, [1, 2, 3, 0]),
            (1, 2, 3, 3, [0, 0, 2, 2]),
            (2, 1, 5, 2, [3, 1, 1, 4]),
        ] {
            let input = rng.vec(batch * channels * h * w);
            let (oh, ow) = (h + pad[0] + pad[2], w + pad[1] + pad[3]);
            let mut out = vec![f32::NAN; batch * channels * oh * ow];
            pad2d(batch, channels, h, w, pad, -0.5, &input, &mut out);
            let mut want = Vec::new();
            for n in 0..batch * channels {
                for y in 0..oh {
                    for x in 0..ow {
                        let iy = y as isize - pad[0] as isize;
                        let ix = x as isize - pad[1] as isize;
                        let inside = iy >= 0 && ix >= 0 && iy < h as isize && ix < w as isize;
                        want.push(if inside {
                            input[(n * h + iy as usize) * w + ix as usize]
                        } else {
                            -0.5
                        });
                    }
                }
            }
            assert_eq!(out, want, "pad2d {batch}x{channels}x{h}x{w} {pad:?}");
        }
    }
}
