//! conv2d for AVX-512F: the same strategy as AVX2 (see `avx2::conv`), with the 12 x 32
//! micro-kernel. Depthwise convolutions go to this ISA's
//! [`super::depthwise::depthwise_conv2d`]; every other one is a GEMM per (image, group),
//! pointwise ones on the input as it lies and the rest through the implicit im2col packer
//! (`avx2::im2col`), with bias and activation in the GEMM's epilogue, except stride-1 ones
//! with at most 64 output channels, whose GEMM reads a zero-padded copy of the input in place
//! (`avx2::flat`, in `scratch`), and stride-2 ones whose output is as large as a phase of the
//! input, whose GEMM reads the input's phases (`avx2::im2col::conv2d_gemm`, in `scratch`);
//! `scratch` also goes to the depthwise kernel.

use super::gemm::{Avx512, NR};
use crate::arch::x86_64::avx2::im2col::conv2d_gemm;
use crate::par::{Parallel, Serial};
use crate::{Activation, Conv2d};

conv_entries!(Avx512, "avx512f,avx2,fma");

winograd_entry!("avx512f,avx2,fma", super::gemm::gemm);

winograd_nchwc_entry!(
    "avx512f,avx2,fma",
    super::gemm::gemm,
    crate::arch::x86_64::simd::vector::Avx512F
);

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::{Avx512, NR};
    use crate::arch::x86_64::avx2::flat::conv2d_flat;
    use crate::arch::x86_64::avx2::im2col::conv2d_gemm;
    use crate::pack::{pack_conv2d, WeightLayout};
    use crate::par::Serial;
    use crate::{Activation, Conv2d};
    use std::{eprintln, vec, vec::Vec};

    /// Deterministic data in [-1, 1).
    fn data(len: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 8) as f32 / (1 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// The padded-input path (`avx2::flat`) takes these shapes and gives the implicit im2col
    /// GEMM's output (to the bit where that GEMM computes a column in a tile; its ragged
    /// last columns are dot products, summed in another order):
    /// DenseNet-121's 128 -> 32 3x3 on 14x14 and 7x7 maps (three depth blocks), a reduction
    /// of several blocks with ragged slivers, dilation, asymmetric and one-sided padding, a
    /// 5x5 window, two images, a residual, and every kind of activation.
    #[test]
    fn flat_conv_is_the_im2col_gemm() {
        if !std::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: no AVX-512F");
            return;
        }
        /// `(batch, c_in, h, w, c_out, k, dilation, pad [top, left, bottom, right])`.
        type Shape = (usize, usize, usize, usize, usize, usize, usize, [usize; 4]);
        let shapes: [Shape; 8] = [
            (1, 128, 14, 14, 32, 3, 1, [1; 4]),
            (1, 128, 7, 7, 32, 3, 1, [1; 4]),
            (1, 100, 9, 11, 45, 3, 1, [1; 4]),
            (2, 16, 13, 10, 20, 3, 2, [2; 4]),
            (1, 8, 12, 12, 17, 3, 1, [0, 2, 1, 0]),
            (1, 8, 10, 12, 24, 3, 1, [0; 4]),
            (1, 12, 11, 9, 16, 5, 1, [2, 1, 2, 3]),
            (2, 40, 6, 15, 33, 3, 1, [1, 1, 0, 2]),
        ];
        let acts = [
            Activation::None,
            Activation::Relu,
            Activation::Sigmoid,
            Activation::LeakyRelu { alpha: 0.1 },
        ];
        for (i, &(batch, c_in, h, w, c_out, k, d, pad)) in shapes.iter().enumerate() {
            let span = d * (k - 1);
            let p = Conv2d {
                batch,
                c_in,
                h,
                w,
                c_out,
                kh: k,
                kw: k,
                stride: [1, 1],
                dilation: [d, d],
                pad,
                groups: 1,
                out_h: h + pad[0] + pad[2] - span,
                out_w: w + pad[1] + pad[3] - span,
            };
            let seed = i as u32 * 7 + 1;
            let input = data(batch * c_in * h * w, seed);
            let raw = data(c_out * c_in * k * k, seed + 1);
            let mut weight = vec![0.0; raw.len()];
            pack_conv2d(WeightLayout::DepthBlocked, &p, &raw, &mut weight);
            let bias = data(c_out, seed + 2);
            let out_len = batch * c_out * p.out_h * p.out_w;
            let res = data(out_len, seed + 3);
            for (j, &act) in acts.iter().enumerate() {
                let res = (j % 2 == 1).then_some(&res[..]);
                let mut want = vec![f32::NAN; out_len];
                let mut got = vec![f32::NAN; out_len];
                let mut scratch = vec![f32::NAN; p.scratch_len()];
                // SAFETY: AVX-512F was detected (and AVX2 and FMA come with it on every
                // CPU that has it; the table checks all three, this test only the first).
                let taken = unsafe {
                    let s = Avx512::new();
                    conv2d_gemm::<Avx512, NR>(
                        s,
                        &Serial,
                        &p,
                        &input,
                        &weight,
                        Some(&bias),
                        res,
                        act,
                        &mut [],
                        &mut want,
                    );
                    conv2d_flat::<Avx512, NR>(
                        &Serial,
                        &p,
                        &input,
                        &weight,
                        Some(&bias),
                        res,
                        act,
                        &mut scratch,
                        &mut got,
                    )
                };
                assert!(taken, "{p:?} not taken");
                let differ = got
                    .iter()
                    .zip(&want)
                    .position(|(g, w)| (g - w).abs() > 1e-5 * w.abs().max(1.0));
                assert_eq!(differ, None, "{p:?} {act:?} res {}", res.is_some());
                let same = got
                    .iter()
                    .zip(&want)
                    .filter(|(g, w)| g.to_bits() == w.to_bits());
                // Most elements are tile columns on both paths.
                assert!(2 * same.count() > out_len, "{p:?} {act:?}");
            }
        }
    }
}
