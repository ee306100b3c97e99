//! Kernel implementations, one folder per instruction set (the layout of memchr's `arch/`).
//!
//! Only `portable` exists today: plain safe Rust written so that LLVM can autovectorise the
//! inner loops. Later ISA folders (`x86_64/avx2`, `aarch64/neon`, ...) will provide the same
//! function names with the same signatures behind `#[cfg(target_arch)]` on their `mod` lines,
//! and their tests will compare them against `portable` on random shapes.

pub mod portable;
