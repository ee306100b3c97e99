//! conv2d for AVX2 + FMA: every non-depthwise convolution is one GEMM per (image, group) on
//! the blocked driver in [`super::blis`], with the bias and activation fused into its epilogue.
//!
//! Algorithm sketch (the same three branches as the portable kernel, chosen by the same
//! conditions):
//!
//! 1. **Pointwise** (1x1, stride 1, no padding): the group's input planes already are the
//!    `[c_in/g, h*w]` right-hand matrix, packed straight from the input.
//! 2. **Depthwise** (one input and one output channel per group): handed to
//!    [`super::depthwise::depthwise_conv2d`], direct SIMD loops.
//! 3. **General** (3x3, strided, padded, dilated, grouped): `weights[c_out/g, k] *
//!    im2col(input)[k, oh*ow]`, where the im2col matrix is never written: the GEMM's packing
//!    step reads the input through the im2col map ([`super::im2col`]) straight into
//!    its stack panel. That is one pass over the data instead of two (write im2col, then pack
//!    it), and it needs no scratch: [`Conv2d::scratch_len`]'s im2col matrix is for the
//!    portable kernel, and the two branches below borrow it. With AVX-512, whose micro-kernel reads `B` in place, a stride-1
//!    convolution with few output channels first goes to [`super::flat`], the GEMM on a
//!    zero-padded copy of the input, which lives in that scratch; on both ISAs, for a stride-2
//!    one whose output is as large as a phase of its input, [`super::im2col::conv2d_gemm`]
//!    splits the input into its phases there first.
//!
//! The weights `[c_out, c_in/g, kh, kw]` are, per group, the `[c_out/g, k]` left-hand matrix,
//! which the model stored in [`WeightLayout::DepthBlocked`](crate::pack::WeightLayout) when it
//! prepared its parameters (the table's `weights`), so its slivers are read in place; the bias
//! is per row of the GEMM. Depthwise weights stay as they are.

use super::gemm::NR;
use super::im2col::conv2d_gemm;
use super::lanes::Avx2;
use crate::par::{Parallel, Serial};
use crate::{Activation, Conv2d};

conv_entries!(Avx2, "avx2,fma");

winograd_entry!("avx2,fma", super::gemm::gemm);

winograd_nchwc_entry!(
    "avx2,fma",
    super::gemm::gemm,
    crate::arch::x86_64::simd::vector::Avx2Fma
);
