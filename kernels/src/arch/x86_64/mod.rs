//! x86_64 kernels: `avx2` needs AVX2 and FMA; `avx512` needs AVX-512F on top of those.

pub mod avx2;
pub mod avx512;
mod simd;
