//! kiln-kernels: the kernels that kiln's generated code calls.
//!
//! Everything is `no_std`, allocation-free and works on row-major, contiguous slices (NCHW /
//! NCDHW for the image kernels). Callers (generated code) have already proved every length;
//! the kernels `debug_assert!` them and otherwise rely on safe indexing, so a wrong length is a
//! panic, never undefined behaviour. A slice may be longer than its dimensions require; only
//! the prefix is used.
//!
//! Families (one file each under `arch/portable/`, with the same names in every ISA folder).
//! The `f32` image kernels, reached through the [`Kernels`] table:
//!
//! * **gemm** — [`gemm`] (`C = A B`) and [`dense`] (fully connected, `out = x Wᵀ + b`).
//! * **conv** — [`conv2d`] with padding, stride, dilation and groups: a GEMM for 1x1, direct
//!   loops for depthwise, im2col + GEMM otherwise; [`Conv2d::scratch_len`] sizes its scratch.
//! * **pool** — [`max_pool2d`], [`avg_pool2d`], [`global_avg_pool`].
//! * **eltwise** — [`unary`] activations and broadcasting [`binary`] arithmetic, in and out of
//!   place.
//! * **norm** — folded batch norm ([`scale_shift`], [`fold_batch_norm`],
//!   [`batch_norm_scale_shift`]), [`softmax`] and [`log_softmax`].
//! * **copy** — channel concatenation ([`copy_into_channels`]) and constant padding
//!   ([`pad2d`]).
//!
//! The shape-generic kernels of the typed tensor IR (any rank 0 to 8), free functions rather
//! than table entries, generic over the sealed element traits [`Element`] (`f32`, `f64`, `i64`,
//! `i32`, `u8`/bool) and [`Num`]; geometry structs hold `&'a [usize]` so they are constants:
//!
//! * **shape** — [`transpose`], [`slice()`], [`expand`], [`gather`], [`copy_into_axis`] /
//!   [`copy_from_axis`] (concat / split on any axis), [`pad_nd`] (constant, reflect, edge),
//!   [`cast`] / [`cast_to_bool`], [`range`], [`nonzero_count`] + [`nonzero`].
//! * **reduce** — [`reduce`] (sum, mean, max, min, product over a merged axis), [`unary_math`]
//!   (`f32` sqrt, exp, log, erf, softplus, GELU, ...), rank-N broadcasting [`binary_nd`],
//!   [`compare_nd`] (to `u8` bools), [`pow_nd`] and [`where_nd`].
//! * **matmul** — [`matmul`] (numpy batch broadcasting, one call of the table's [`GemmFn`] per
//!   batch element) and [`matmul_f64`].
//! * **conv_nd** — [`conv3d`] (im2col + the table's GEMM, [`Conv3d::scratch_len`]),
//!   [`max_pool3d`], [`avg_pool3d`] (with dilation).
//! * **conv_transpose** — [`conv_transpose`] (1- to 3-D; the table's GEMM + col2im,
//!   [`ConvTranspose::scratch_len`]).
//!
//! [`nchwc`] is the blocked channel layout (NCHW16c): its converters, its weight packer and
//! its convolution's portable reference; the table's `conv2d_nchwc` is each ISA's version.
//!
//! Weights a table's `conv2d` reads in a layout of its own ([`Kernels::weights`]) are put there
//! once by [`pack`], when a model prepares its parameters, never by a run.
//!
//! Activations ([`Activation`]) are fused into the producing kernel through one shared epilogue.
//! [`math`] has the `no_std` `exp`/`tanh`/`sigmoid`/`sqrt`/`log`/`erf` they need.
//!
//! The functions re-exported here are the portable reference implementations from
//! [`arch::portable`]. SIMD implementations live beside it under `arch/` with the same
//! signatures and are tested against it.

#![no_std]

#[cfg(feature = "std")]
extern crate std;

pub mod arch;
mod dtype;
mod len;
pub mod math;
pub mod nchwc;
pub mod pack;
pub mod par;
mod params;
mod split;
mod table;

#[cfg(test)]
mod testutil;

pub use arch::portable::{
    avg_pool2d, avg_pool3d, batch_norm_scale_shift, binary, binary_inplace, binary_nd, cast,
    cast_to_bool, compare_nd, conv2d, conv2d_res, conv3d, conv_transpose, copy_from_axis,
    copy_into_axis, copy_into_channels, dense, expand, fold_batch_norm, gather, gemm,
    global_avg_pool, log_softmax, log_softmax_inplace, matmul, matmul_f64, max_pool2d, max_pool3d,
    nonzero, nonzero_count, pad2d, pad_nd, pow_nd, range, reduce, scale_shift, scale_shift_inplace,
    slice, softmax, softmax_inplace, transpose, unary, unary_inplace, unary_math,
    unary_math_inplace, where_nd, GemmFn,
};
pub use dtype::{Element, GatherIndex, Num};
pub use pack::WeightLayout;
pub use params::{
    Activation, BinaryNd, BinaryOp, Broadcast, CompareOp, Conv2d, Conv3d, ConvTranspose, Expand,
    GatherError, MatMul, PadMode, PadNd, Pool2d, Pool3d, Reduce, Slice, Transpose, UnaryMath,
    WhereNd,
};
pub use split::{DEPTHWISE_SCRATCH_SLOTS, MIN_PARALLEL_ELEMENTS};
pub use table::{
    best, detect, for_isa, ConvParFn, ConvResFn, ConvResParFn, Isa, Kernels, NchwcConvFn,
    NchwcWinogradFn, NchwcWinogradParFn, ParEntries, PORTABLE,
};

/// Winograd F(4x4, 3x3) convolution: the load-time filter transform and the portable kernel
/// (the table's `conv2d_winograd` entry is each ISA's version of it).
pub mod winograd {
    pub use crate::arch::portable::winograd::{conv2d, transform_filter};
}
