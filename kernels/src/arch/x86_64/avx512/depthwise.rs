//! Depthwise conv2d for AVX-512F: the generic kernel of [`crate::arch::x86_64::simd::depthwise`]
//! (see there for the algorithm) compiled with this ISA's features. `conv.rs` calls
//! [`depthwise_conv2d`] for convolutions with one input and one output channel per group;
//! shapes it does not specialise (windows other than 3x3 and 5x5, strides other than 1 and 2,
//! dilation) run the portable kernel.

use crate::arch::x86_64::simd::{depthwise, isa_entries, vector::Avx512F};
use crate::{Activation, Conv2d};

isa_entries! {
    features: "avx512f,avx2,fma",
    token: Avx512F;
    /// Depthwise [`crate::conv2d`]: same signature and semantics; `scratch` holds the band buffer.
    #[allow(clippy::too_many_arguments)]
    fn depthwise_conv2d(
        p: &Conv2d,
        input: &[f32],
        weight: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
        scratch: &mut [f32],
        out: &mut [f32],
    ) => depthwise::conv2d;
}
