//! Scale/shift and softmax for AVX2 + FMA: the generic kernels of
//! [`crate::arch::x86_64::simd::norm`] (see there for the algorithm) compiled with this ISA's
//! features.

use crate::arch::x86_64::simd::{isa_entries, norm, vector::Avx2Fma};
use crate::Activation;

isa_entries! {
    features: "avx2,fma",
    token: Avx2Fma;
    /// [`crate::scale_shift`].
    #[allow(clippy::too_many_arguments)]
    fn scale_shift(
        batch: usize,
        channels: usize,
        spatial: usize,
        input: &[f32],
        scale: &[f32],
        shift: &[f32],
        act: Activation,
        out: &mut [f32],
    ) => norm::scale_shift;
    /// [`crate::scale_shift_inplace`].
    #[allow(clippy::too_many_arguments)]
    fn scale_shift_inplace(
        batch: usize,
        channels: usize,
        spatial: usize,
        data: &mut [f32],
        scale: &[f32],
        shift: &[f32],
        act: Activation,
    ) => norm::scale_shift_inplace;
    /// [`crate::softmax`].
    fn softmax(outer: usize, len: usize, inner: usize, input: &[f32], out: &mut [f32])
        => norm::softmax;
    /// [`crate::softmax_inplace`].
    fn softmax_inplace(outer: usize, len: usize, inner: usize, data: &mut [f32])
        => norm::softmax_inplace;
}
