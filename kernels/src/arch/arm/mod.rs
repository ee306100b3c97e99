//! 32-bit arm kernels: [`neon`], written with `asm!`, and its run-time detection.
//!
//! Why `asm!`: on `arm` targets the NEON intrinsics (`core::arch::arm`),
//! `#[target_feature(enable = "neon")]` and `is_arm_feature_detected!` are unstable, so on
//! stable Rust the only way to run NEON code chosen at run time is hand-written assembly,
//! assembled under a `.fpu neon` directive (the `armv7-unknown-linux-gnueabihf` baseline is
//! VFPv3 without NEON, so the assembler would refuse NEON mnemonics otherwise). That is code
//! the compiler cannot check, so it is kept to the loops that carry the work: the GEMM
//! micro-kernel, which `gemm`, `conv2d` (pointwise and im2col) and, through the table's GEMM,
//! `matmul` and `conv3d` run on, and the dot-product loop of `dense`. Everything else stays
//! portable.
//!
//! Detection is [`neon_detected`]: the kernel's one requirement, NEON, read from the
//! `AT_HWCAP` auxiliary vector (the kernel's own report of the CPU, which is what `/proc/cpuinfo`
//! prints too), or, without `std`, the build's `target_feature`.

pub mod neon;

/// Whether this CPU has NEON (Advanced SIMD), the only feature the [`neon`] kernels use.
pub(crate) fn neon_detected() -> bool {
    #[cfg(all(feature = "std", any(target_os = "linux", target_os = "android")))]
    {
        /// `AT_HWCAP` from `<elf.h>`: the auxiliary vector entry with the CPU's feature bits.
        const AT_HWCAP: core::ffi::c_ulong = 16;
        /// `HWCAP_NEON` from the kernel's `arch/arm/include/uapi/asm/hwcap.h`.
        const HWCAP_NEON: core::ffi::c_ulong = 1 << 12;
        extern "C" {
            /// glibc, musl and bionic all have it (glibc since 2.16); with `std` the C library
            /// is linked anyway.
            fn getauxval(kind: core::ffi::c_ulong) -> core::ffi::c_ulong;
        }
        // SAFETY: `getauxval` takes any entry type and returns 0 for one it does not know; it
        // reads the process's auxiliary vector, which never changes.
        let hwcap = unsafe { getauxval(AT_HWCAP) };
        hwcap & HWCAP_NEON != 0
    }
    #[cfg(not(all(feature = "std", any(target_os = "linux", target_os = "android"))))]
    {
        cfg!(target_feature = "neon")
    }
}
