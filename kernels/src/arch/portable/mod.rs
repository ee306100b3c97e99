//! The portable reference kernels: safe Rust, no `unsafe`, no allocation.
//!
//! Each family is a file; this module re-exports their public functions so that
//! `arch::portable::<name>` is the full set, the shape every ISA module will share.

pub(crate) mod conv; // `conv2d_with`, for ISAs that bring only a GEMM (32-bit arm).
mod conv_nd;
mod conv_transpose;
mod copy;
mod eltwise;
pub(crate) mod epilogue; // With `gemm::dot`, for 32-bit arm's NEON `dense`.
pub(crate) mod gemm;
mod matmul;
mod nd;
mod norm;
mod pool;
mod reduce;
mod shape;
pub(crate) mod winograd; // `conv2d_with`, for every ISA's entry with its own GEMM.
pub(crate) mod winograd_nchwc; // Likewise, in the blocked layout.

pub use conv::{conv2d, conv2d_res};
pub use conv_nd::{avg_pool3d, conv3d, max_pool3d};
pub use conv_transpose::conv_transpose;
pub use copy::{copy_into_channels, pad2d};
pub use eltwise::{binary, binary_inplace, unary, unary_inplace};
pub use gemm::{dense, gemm};
pub use matmul::{matmul, matmul_f64, GemmFn};
pub use norm::{
    batch_norm_scale_shift, fold_batch_norm, log_softmax, log_softmax_inplace, scale_shift,
    scale_shift_inplace, softmax, softmax_inplace,
};
pub use pool::{avg_pool2d, global_avg_pool, max_pool2d};
pub use reduce::{binary_nd, compare_nd, pow_nd, reduce, unary_math, unary_math_inplace, where_nd};
pub use shape::{
    cast, cast_to_bool, copy_from_axis, copy_into_axis, expand, gather, nonzero, nonzero_count,
    pad_nd, range, slice, transpose,
};
