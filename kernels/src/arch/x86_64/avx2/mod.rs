//! avx2 kernels. [`upgrade`] puts them into a table; the table code (`crate::table`) only
//! calls it after detecting every CPU feature they use.
//!
//! The entry points are safe functions whose `unsafe` calls into `#[target_feature]` code are
//! justified by that detection. GEMM and conv2d are this folder's own files; depthwise,
//! element-wise, norm, pool and the blocked layout's converters are the generic kernels of
//! `x86_64/simd`, whose entries [`simd_families!`](crate::arch::x86_64::simd::simd_families)
//! defines.

pub(super) mod blis;
mod conv;
pub(super) mod flat;
mod gemm;
pub(super) mod im2col;
pub(super) mod kern;
pub(super) mod kloop;
pub(super) mod lanes;
pub(super) mod nchwc;

use crate::table::Kernels;

crate::arch::x86_64::simd::simd_families!("avx2,fma", Avx2Fma);

/// Overwrites the entries of `k` this ISA implements.
pub(crate) const fn upgrade(k: &mut Kernels) {
    k.gemm = gemm::gemm;
    k.dense = gemm::dense;
    k.conv2d = conv::conv2d;
    k.conv2d_res = conv::conv2d_res;
    k.conv2d_winograd = conv::conv2d_winograd;
    k.conv2d_nchwc = conv2d_nchwc;
    k.conv2d_nchwc_winograd = conv::conv2d_nchwc_winograd;
    k.to_blocked = convert::to_blocked;
    k.from_blocked = convert::from_blocked;
    // The blocked plans end to end, against the NCHW ones on this table (AMD EPYC Zen 4 under
    // `KILN_ISA=avx2`, pinned A/B in turns, 9 rounds): DenseNet-121 0.866, ResNet-18 0.931,
    // Inception-v2 0.963, VGG-19 0.963, ResNet-50 0.992, SqueezeNet 1.014 (geomean of the
    // seven benchmark networks 0.97); on an AVX2-only AMD EPYC Zen 3 (15 rounds) DenseNet-121
    // 0.910, SqueezeNet 0.867, Inception-v2 0.940, ResNet-18 0.931, ResNet-50 0.976 (the
    // inverses of NCHW over blocked, docs/performance.md "Zen 3"). The blocked Winograd is
    // what gains (1.3-1.5x the NCHW one, Intel Xeon 207); the direct blocked convolution, one block by six pixels here, is
    // slower than this table's GEMM (median 0.82), but the layers the compiler blocks for it
    // are few. docs/performance.md, "The blocked plans on AVX2; the blocked layout on Zen 4".
    k.blocked = true;
    k.par = Some(crate::table::ParEntries {
        gemm: gemm::gemm_par,
        conv2d: conv::conv2d_par,
        conv2d_res: conv::conv2d_res_par,
        conv2d_winograd: conv::conv2d_winograd_par,
        conv2d_nchwc: conv2d_nchwc_par,
        conv2d_nchwc_winograd: conv::conv2d_nchwc_winograd_par,
    });
    k.weights = crate::pack::WeightLayout::DepthBlocked;
    k.unary = eltwise::unary;
    k.unary_inplace = eltwise::unary_inplace;
    k.binary = eltwise::binary;
    k.binary_inplace = eltwise::binary_inplace;
    k.scale_shift = norm::scale_shift;
    k.scale_shift_inplace = norm::scale_shift_inplace;
    k.softmax = norm::softmax;
    k.softmax_inplace = norm::softmax_inplace;
    k.max_pool2d = pool::max_pool2d;
    k.avg_pool2d = pool::avg_pool2d;
    k.global_avg_pool = pool::global_avg_pool;
    let _ = depthwise::depthwise_conv2d;
}

// The blocked convolution ([`crate::nchwc`]): one block (two vectors) by six pixels.
nchwc::nchwc_entry!(lanes::Avx2, "avx2,fma", 2, 2, 6);
