//! NEON (aarch64 Advanced SIMD) kernels. [`upgrade`] puts them into a table; the table code
//! (`crate::table`) only calls it after detecting NEON, the one feature they use.
//!
//! Every family file has the portable names and signatures. Its `pub(crate)` entry points are
//! safe functions whose single `unsafe` call into a `#[target_feature(enable = "neon")] unsafe
//! fn` is justified by that detection; below those, the helpers (`simd.rs`, the GEMM
//! micro-kernel, ...) are *safe* `#[target_feature]` functions, which the compiler only lets
//! NEON-enabled code call, so no further `unsafe` is needed except for the raw loads and
//! stores, each behind a length check.
//!
//! What is vectorised: GEMM (packed 8x12 micro-kernel) and dense (GEMV-style dot products),
//! conv2d (1x1 as GEMM, general as im2col + GEMM, both with bias and activation fused;
//! depthwise as direct SIMD), element-wise activations and broadcasting arithmetic, and
//! scale/shift. Pooling and softmax are still the portable kernels (`pool.rs`, `norm.rs`).
//! Correctness is checked under qemu-aarch64 in CI (`.ci/cross`); speed is not measured there,
//! since emulated timings say nothing about a real core.

mod conv;
mod depthwise;
mod eltwise;
mod gemm;
mod norm;
mod pool;
mod simd;

use crate::table::Kernels;

/// Overwrites the entries of `k` this ISA implements.
pub(crate) const fn upgrade(k: &mut Kernels) {
    k.gemm = gemm::gemm;
    k.dense = gemm::dense;
    k.conv2d = conv::conv2d;
    k.conv2d_res = conv::conv2d_res;
    k.conv2d_winograd = conv::conv2d_winograd;
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
}
