//! avx512 kernels. [`upgrade`] puts them into a table; the table code (`crate::table`) only
//! calls it after detecting every CPU feature they use.
//!
//! The entry points are safe functions whose `unsafe` calls into `#[target_feature]` code are
//! justified by that detection. GEMM and conv2d are this folder's own files; depthwise,
//! element-wise, norm, pool and the blocked layout's converters are the generic kernels of
//! `x86_64/simd`, whose entries [`simd_families!`](crate::arch::x86_64::simd::simd_families)
//! defines.

mod conv;
mod gemm;

use crate::table::Kernels;

crate::arch::x86_64::simd::simd_families!("avx512f,avx2,fma", Avx512F);

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
    // Blocked over NCHW on the layers the compiler blocks: median 1.00, 1.0-1.6 on 56x56 and
    // 28x28 maps (Intel Xeon 207, docs/performance.md); end to end on AMD EPYC Zen 4, the
    // blocked plans over the NCHW ones: DenseNet-121 0.875, ResNet-18 0.890, Inception-v2
    // 0.920, ResNet-50 0.978, SqueezeNet and VGG-19 1.00.
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

// The blocked convolution ([`crate::nchwc`]): four blocks (64 channels) by six pixels.
crate::arch::x86_64::avx2::nchwc::nchwc_entry!(gemm::Avx512, "avx512f,avx2,fma", 4, 1, 6);
