//! 3-D convolution and pooling against naive references: the convolution is the seven nested
//! loops of the definition (plus batch), each tap's input coordinate computed in signed
//! arithmetic and tested against the bounds one at a time, accumulated in `f64`; pooling
//! likewise visits every tap and counts real and padded ones itself.
//!
//! Random groups, strides, dilations, asymmetric paddings and ceil-mode output sizes (windows
//! that hang past the end padding); the convolution runs on the portable GEMM and on every ISA
//! table's GEMM this CPU has, with exactly `scratch_len` floats of scratch, so the scratch
//! contract is tested too.

mod common;

use kiln_kernels::{avg_pool3d, conv3d, max_pool3d, Activation, Conv3d, Pool3d, PORTABLE};
use proptest::prelude::*;

fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// Output length along one axis: floor or ceil mode, at least 1 when the window fits at all.
fn out_len(n: usize, k: usize, s: usize, dil: usize, pads: usize, ceil: bool) -> usize {
    let span = (k - 1) * dil + 1;
    if n + pads < span {
        return 0;
    }
    let r = n + pads - span;
    (if ceil { r.div_ceil(s) } else { r / s }) + 1
}

fn naive_conv(p: &Conv3d, x: &[f32], w: &[f32], bias: Option<&[f32]>, act: Activation) -> Vec<f64> {
    let cig = p.c_in / p.groups;
    let cog = p.c_out / p.groups;
    let [od, oh, ow] = p.out;
    let [kd, kh, kw] = p.k;
    let mut y = Vec::new();
    for b in 0..p.batch {
        for co in 0..p.c_out {
            let g = co / cog;
            for oz in 0..od {
                for oy in 0..oh {
                    for ox in 0..ow {
                        let mut s = bias.map_or(0.0, |bias| f64::from(bias[co]));
                        for ci in 0..cig {
                            for tz in 0..kd {
                                for ty in 0..kh {
                                    for tx in 0..kw {
                                        let iz = (oz * p.stride[0] + tz * p.dilation[0]) as isize
                                            - p.pad[0] as isize;
                                        let iy = (oy * p.stride[1] + ty * p.dilation[1]) as isize
                                            - p.pad[1] as isize;
                                        let ix = (ox * p.stride[2] + tx * p.dilation[2]) as isize
                                            - p.pad[2] as isize;
                                        if iz < 0
                                            || iy < 0
                                            || ix < 0
                                            || iz >= p.d as isize
                                            || iy >= p.h as isize
                                            || ix >= p.w as isize
                                        {
                                            continue;
                                        }
                                        let c = g * cig + ci;
                                        let xv = x[(((b * p.c_in + c) * p.d + iz as usize) * p.h
                                            + iy as usize)
                                            * p.w
                                            + ix as usize];
                                        let wv =
                                            w[(((co * cig + ci) * kd + tz) * kh + ty) * kw + tx];
                                        s += f64::from(xv) * f64::from(wv);
                                    }
                                }
                            }
                        }
                        y.push(f64::from(act.apply(s as f32)));
                    }
                }
            }
        }
    }
    y
}

fn naive_pool(p: &Pool3d, x: &[f32], max: bool) -> Vec<f64> {
    let [od, oh, ow] = p.out;
    let dims = [p.d, p.h, p.w];
    let mut y = Vec::new();
    for plane in 0..p.batch * p.channels {
        for oz in 0..od {
            for oy in 0..oh {
                for ox in 0..ow {
                    let o = [oz, oy, ox];
                    let (mut m, mut s, mut real, mut padded) =
                        (f64::NEG_INFINITY, 0.0f64, 0usize, 0usize);
                    let mut nan = false;
                    for tz in 0..p.k[0] {
                        for ty in 0..p.k[1] {
                            for tx in 0..p.k[2] {
                                let t = [tz, ty, tx];
                                let pc: Vec<usize> = (0..3)
                                    .map(|a| o[a] * p.stride[a] + t[a] * p.dilation[a])
                                    .collect();
                                if (0..3).all(|a| pc[a] < p.pad[a] + dims[a] + p.pad[a + 3]) {
                                    padded += 1;
                                }
                                let ic: Vec<isize> =
                                    (0..3).map(|a| pc[a] as isize - p.pad[a] as isize).collect();
                                if (0..3).any(|a| ic[a] < 0 || ic[a] >= dims[a] as isize) {
                                    continue;
                                }
                                let v = f64::from(
                                    x[((plane * p.d + ic[0] as usize) * p.h + ic[1] as usize)
                                        * p.w
                                        + ic[2] as usize],
                                );
                                nan |= v.is_nan();
                                m = m.max(v);
                                s += v;
                                real += 1;
                            }
                        }
                    }
                    let count = if p.count_include_pad { padded } else { real };
                    y.push(if max {
                        if nan {
                            f64::NAN
                        } else {
                            m
                        }
                    } else if count == 0 {
                        0.0
                    } else {
                        s / count as f64
                    });
                }
            }
        }
    }
    y
}

fn close(got: &[f32], want: &[f64], what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            f64::from(g) == w
        } else {
            (f64::from(g) - w).abs() <= 1e-5 * w.abs().max(1.0)
        };
        prop_assert!(ok, "{}: [{}] got {} want {}", what, i, g, w);
    }
    Ok(())
}

const ACTS: [Activation; 3] = [Activation::None, Activation::Relu, Activation::Tanh];

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(120) })]

    #[test]
    fn conv3d_matches_naive(
        (batch, groups, cig, cog) in (1usize..3, 1usize..4, 1usize..4, 1usize..4),
        dims in [1usize..7, 1usize..7, 1usize..8],
        k in [1usize..4, 1usize..4, 1usize..4],
        stride in [1usize..3, 1usize..3, 1usize..4],
        dilation in [1usize..3, 1usize..3, 1usize..3],
        pad in [0usize..3, 0usize..3, 0usize..3, 0usize..3, 0usize..3, 0usize..3],
        (has_bias, act, pointwise, seed) in (any::<bool>(), 0usize..3, prop::bool::weighted(0.2), any::<u32>()),
    ) {
        let (k, stride, pad) = if pointwise { ([1; 3], [1; 3], [0; 6]) } else { (k, stride, pad) };
        let out: Vec<usize> = (0..3).map(|a| out_len(dims[a], k[a], stride[a], dilation[a], pad[a] + pad[a + 3], false)).collect();
        let p = Conv3d {
            batch, c_in: groups * cig, d: dims[0], h: dims[1], w: dims[2], c_out: groups * cog,
            k, stride, dilation, pad, groups, out: [out[0], out[1], out[2]],
        };
        let x = data(batch * p.c_in * dims.iter().product::<usize>(), seed);
        let w = data(p.c_out * cig * k.iter().product::<usize>(), seed ^ 0xabc);
        let bias = data(p.c_out, seed ^ 0x123);
        let bias = has_bias.then_some(&bias[..]);
        let act = ACTS[act];
        let want = naive_conv(&p, &x, &w, bias, act);
        let mut gemms = vec![PORTABLE];
        gemms.extend(common::isas("conv_nd"));
        for t in gemms {
            let mut scratch = vec![f32::NAN; p.scratch_len()];
            let mut y = vec![f32::NAN; want.len()];
            conv3d(&p, &x, &w, bias, act, &mut scratch, &mut y, t.gemm);
            close(&y, &want, &format!("{} {p:?}", t.isa))?;
        }
    }

    #[test]
    fn pool3d_matches_naive(
        (batch, channels) in (1usize..3, 1usize..3),
        dims in [1usize..6, 1usize..6, 1usize..9],
        k in [1usize..4, 1usize..4, 1usize..4],
        stride in [1usize..3, 1usize..3, 1usize..4],
        dilation in [1usize..3, 1usize..3, 1usize..3],
        pad in [0usize..2, 0usize..2, 0usize..2, 0usize..2, 0usize..2, 0usize..2],
        (ceil, include, seed) in (any::<bool>(), any::<bool>(), any::<u32>()),
    ) {
        // ONNX requires pads below the window; keep them so.
        let pad: [usize; 6] = core::array::from_fn(|i| pad[i].min(k[i % 3] - 1));
        let out: Vec<usize> = (0..3).map(|a| out_len(dims[a], k[a], stride[a], dilation[a], pad[a] + pad[a + 3], ceil)).collect();
        let p = Pool3d {
            batch, channels, d: dims[0], h: dims[1], w: dims[2], k, stride, dilation, pad,
            out: [out[0], out[1], out[2]], count_include_pad: include,
        };
        let mut x = data(batch * channels * dims.iter().product::<usize>(), seed);
        if seed % 5 == 0 {
            let at = seed as usize % x.len();
            x[at] = f32::NAN;
        }
        let n: usize = batch * channels * out.iter().product::<usize>();
        let mut y = vec![f32::NAN; n];
        max_pool3d(&p, &x, &mut y);
        close(&y, &naive_pool(&p, &x, true), &format!("max {p:?}"))?;
        let mut y = vec![f32::NAN; n];
        avg_pool3d(&p, &x, &mut y);
        close(&y, &naive_pool(&p, &x, false), &format!("avg {p:?}"))?;
    }
}

#[test]
fn conv3d_scratch_len_formula() {
    let base = Conv3d {
        batch: 1,
        c_in: 4,
        d: 5,
        h: 6,
        w: 7,
        c_out: 6,
        k: [1, 1, 1],
        stride: [1, 1, 1],
        dilation: [1, 1, 1],
        pad: [0; 6],
        groups: 2,
        out: [5, 6, 7],
    };
    assert_eq!(base.scratch_len(), 0);
    const P: Conv3d = Conv3d {
        batch: 1,
        c_in: 4,
        d: 5,
        h: 6,
        w: 7,
        c_out: 6,
        k: [3, 2, 1],
        stride: [1, 1, 1],
        dilation: [1, 1, 1],
        pad: [1, 0, 0, 1, 0, 0],
        groups: 2,
        out: [5, 5, 7],
    };
    const N: usize = P.scratch_len();
    assert_eq!(N, 2 * 3 * 2 * 5 * 5 * 7);
    let strided = Conv3d {
        stride: [1, 1, 2],
        out: [5, 6, 4],
        ..base
    };
    assert_eq!(strided.scratch_len(), 2 * 5 * 6 * 4);
}
