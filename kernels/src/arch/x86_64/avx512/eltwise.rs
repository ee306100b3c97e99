//! Element-wise kernels for AVX-512F: the generic kernels of
//! [`crate::arch::x86_64::simd::eltwise`] (see there for the algorithm) compiled with this
//! ISA's features.

use crate::arch::x86_64::simd::{eltwise, isa_entries, vector::Avx512F};
use crate::{Activation, BinaryOp, Broadcast};

isa_entries! {
    features: "avx512f,avx2,fma",
    token: Avx512F;
    /// [`crate::unary`].
    fn unary(act: Activation, input: &[f32], out: &mut [f32]) => eltwise::unary;
    /// [`crate::unary_inplace`].
    fn unary_inplace(act: Activation, data: &mut [f32]) => eltwise::unary_inplace;
    /// [`crate::binary`].
    fn binary(op: BinaryOp, bc: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32])
        => eltwise::binary;
    /// [`crate::binary_inplace`].
    fn binary_inplace(
        op: BinaryOp,
        bc: &Broadcast,
        acc: &mut [f32],
        other: &[f32],
        acc_is_lhs: bool,
    ) => eltwise::binary_inplace;
}
