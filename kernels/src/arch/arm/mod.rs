//! 32-bit arm: the portable kernels, on purpose.
//!
//! Why no NEON table here: on `arm` targets the NEON intrinsics (`core::arch::arm`) and
//! `#[target_feature(enable = "neon")]` are still unstable, so on stable Rust the only way to
//! run NEON code chosen at run time is hand-written `asm!`. That is a large amount of
//! unverifiable-by-the-compiler code for a target kiln mainly has to *work* on, so for now
//! `table::best()` reports `portable` here. Builds that know their CPU can still get NEON
//! through auto-vectorisation of the portable loops with `-C target-feature=+neon` (the
//! `armv7-unknown-linux-gnueabihf` baseline has VFPv3 but not NEON, so it is off by default).
//! `asm!` micro-kernels (GEMM first) will go in this folder where they pay.
//!
//! CI builds and runs the kernel and end-to-end tests for `armv7-unknown-linux-gnueabihf` under
//! qemu-arm (`.ci/cross`), and `tests/tests/isa.rs` checks the selection says `portable`.
