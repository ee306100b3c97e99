//! The portable reference kernels: safe Rust, no `unsafe`, no allocation.
//!
//! Each family is a file; this module re-exports their public functions so that
//! `arch::portable::<name>` is the full set, the shape every ISA module will share.

mod conv;
mod copy;
mod eltwise;
mod epilogue;
mod gemm;
mod norm;
mod pool;

pub use conv::conv2d;
pub use copy::{copy_into_channels, pad2d};
pub use eltwise::{binary, binary_inplace, unary, unary_inplace};
pub use gemm::{dense, gemm};
pub use norm::{
    batch_norm_scale_shift, fold_batch_norm, scale_shift, scale_shift_inplace, softmax,
    softmax_inplace,
};
pub use pool::{avg_pool2d, global_avg_pool, max_pool2d};
