//! aarch64 kernels.

pub mod neon;
