//! Pooling for AVX2 + FMA: the generic kernels of [`crate::arch::x86_64::simd::pool`] (see there
//! for the algorithm) compiled with this ISA's features.

use crate::arch::x86_64::simd::{isa_entries, pool, vector::Avx2Fma};
use crate::Pool2d;

isa_entries! {
    features: "avx2,fma",
    token: Avx2Fma;
    /// [`crate::max_pool2d`].
    fn max_pool2d(p: &Pool2d, input: &[f32], out: &mut [f32]) => pool::max_pool2d;
    /// [`crate::avg_pool2d`].
    fn avg_pool2d(p: &Pool2d, input: &[f32], out: &mut [f32]) => pool::avg_pool2d;
    /// [`crate::global_avg_pool`].
    fn global_avg_pool(
        batch: usize,
        channels: usize,
        spatial: usize,
        input: &[f32],
        out: &mut [f32],
    ) => pool::global_avg_pool;
}
