//! Transposed convolution against a naive reference: the definition's scatter (every input
//! element times every tap added to output `i * stride + t * dilation - pad`, the target tested
//! against the bounds in signed arithmetic), accumulated in `f64`, plus a hand-computed 1-D
//! case. Random groups, strides, dilations, asymmetric paddings and output paddings; the kernel
//! runs on the portable GEMM and on every ISA table's GEMM this CPU has, with exactly
//! `scratch_len` floats of NaN-filled scratch, so the scratch contract is tested too.

mod common;

use kiln_kernels::{conv_transpose, ConvTranspose, PORTABLE};
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

fn naive(p: &ConvTranspose, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Vec<f64> {
    let cig = p.c_in / p.groups;
    let cog = p.c_out / p.groups;
    let [id, ih, iw] = p.input;
    let [od, oh, ow] = p.out;
    let [kd, kh, kw] = p.k;
    let out_vol = od * oh * ow;
    let mut y = vec![0.0f64; p.batch * p.c_out * out_vol];
    for b in 0..p.batch {
        for co in 0..p.c_out {
            let v = bias.map_or(0.0, |bias| f64::from(bias[co]));
            y[(b * p.c_out + co) * out_vol..][..out_vol].fill(v);
        }
        for ci in 0..p.c_in {
            let g = ci / cig;
            for c in 0..cog {
                let co = g * cog + c;
                for (iz, iy, ix) in
                    (0..id).flat_map(|z| (0..ih).flat_map(move |y| (0..iw).map(move |x| (z, y, x))))
                {
                    let xv = f64::from(x[(((b * p.c_in + ci) * id + iz) * ih + iy) * iw + ix]);
                    for (tz, ty, tx) in (0..kd)
                        .flat_map(|z| (0..kh).flat_map(move |y| (0..kw).map(move |x| (z, y, x))))
                    {
                        let at = |i: usize, t: usize, a: usize| {
                            (i * p.stride[a] + t * p.dilation[a]) as isize - p.pad[a] as isize
                        };
                        let (oz, oy, ox) = (at(iz, tz, 0), at(iy, ty, 1), at(ix, tx, 2));
                        if oz < 0
                            || oy < 0
                            || ox < 0
                            || oz >= od as isize
                            || oy >= oh as isize
                            || ox >= ow as isize
                        {
                            continue;
                        }
                        let wv = f64::from(w[(((ci * cog + c) * kd + tz) * kh + ty) * kw + tx]);
                        let o = (((b * p.c_out + co) * od + oz as usize) * oh + oy as usize) * ow
                            + ox as usize;
                        y[o] += xv * wv;
                    }
                }
            }
        }
    }
    y
}

fn close(got: &[f32], want: &[f64], what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (f64::from(g) - w).abs() <= 1e-5 * w.abs().max(1.0);
        prop_assert!(ok, "{}: [{}] got {} want {}", what, i, g, w);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(120) })]

    #[test]
    fn conv_transpose_matches_naive(
        (batch, groups, cig, cog) in (1usize..3, 1usize..4, 1usize..4, 1usize..4),
        dims in [1usize..5, 1usize..6, 1usize..7],
        k in [1usize..4, 1usize..4, 1usize..4],
        stride in [1usize..3, 1usize..3, 1usize..4],
        dilation in [1usize..3, 1usize..3, 1usize..3],
        pad in [0usize..3, 0usize..3, 0usize..3, 0usize..3, 0usize..3, 0usize..3],
        out_pad in [0usize..2, 0usize..2, 0usize..3],
        (has_bias, seed) in (any::<bool>(), any::<u32>()),
    ) {
        let full: Vec<usize> = (0..3)
            .map(|a| (dims[a] - 1) * stride[a] + (k[a] - 1) * dilation[a] + 1 + out_pad[a])
            .collect();
        // Padding may not cut the whole output away.
        prop_assume!((0..3).all(|a| full[a] > pad[a] + pad[a + 3]));
        let out: Vec<usize> = (0..3).map(|a| full[a] - pad[a] - pad[a + 3]).collect();
        let p = ConvTranspose {
            batch, c_in: groups * cig, c_out: groups * cog, groups, input: dims, k, stride,
            dilation, pad, out: [out[0], out[1], out[2]],
        };
        let x = data(batch * p.c_in * dims.iter().product::<usize>(), seed);
        let w = data(p.c_in * cog * k.iter().product::<usize>(), seed ^ 0xabc);
        let bias = data(p.c_out, seed ^ 0x123);
        let bias = has_bias.then_some(&bias[..]);
        let want = naive(&p, &x, &w, bias);
        let mut tables = vec![PORTABLE];
        tables.extend(common::isas("conv_transpose"));
        for t in tables {
            let mut scratch = vec![f32::NAN; p.scratch_len()];
            let mut y = vec![f32::NAN; want.len()];
            conv_transpose(&p, &x, &w, bias, &mut scratch, &mut y, t.gemm);
            close(&y, &want, &format!("{} {p:?}", t.isa))?;
        }
    }
}

/// 1-D, by hand: x = [1, 2], w = [1, 10, 100], stride 2, pad 1 at the start, output padding 1.
/// The full result is [1, 10, 102, 20, 200] (+ one position of output padding, 0); cutting one
/// from the start gives [10, 102, 20, 200, 0], plus the bias 0.5.
#[test]
fn one_d_by_hand() {
    let p = ConvTranspose {
        batch: 1,
        c_in: 1,
        c_out: 1,
        groups: 1,
        input: [1, 1, 2],
        k: [1, 1, 3],
        stride: [1, 1, 2],
        dilation: [1, 1, 1],
        pad: [0, 0, 1, 0, 0, 0],
        out: [1, 1, 5],
    };
    let mut scratch = vec![0.0; p.scratch_len()];
    let mut y = vec![f32::NAN; 5];
    conv_transpose(
        &p,
        &[1.0, 2.0],
        &[1.0, 10.0, 100.0],
        Some(&[0.5]),
        &mut scratch,
        &mut y,
        PORTABLE.gemm,
    );
    assert_eq!(y, [10.5, 102.5, 20.5, 200.5, 0.5]);
}
