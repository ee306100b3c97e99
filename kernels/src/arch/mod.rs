//! Kernels by instruction set, memchr-style: `cfg` appears only on these `mod` lines, and every
//! ISA folder uses the same function names as `portable`.

pub mod portable;

#[cfg(target_arch = "x86_64")]
pub mod x86_64;

#[cfg(target_arch = "aarch64")]
pub mod aarch64;

#[cfg(target_arch = "arm")]
pub mod arm;
