//! 32-bit arm. NEON intrinsics and `#[target_feature(enable = "neon")]` are unstable on this
//! target, so it runs the portable kernels (which LLVM auto-vectorises when the build enables
//! NEON); hand-written `asm!` kernels will go here where they pay.
