//! Whether a 32-bit arm CPU has NEON, read from `/proc/self/auxv` (the `HWCAP_NEON` bit of the
//! `AT_HWCAP` entry): the kernel's report of the CPU, taken without kiln's code, which reads the
//! same entry through `getauxval`. (The standard library's `is_arm_feature_detected!` is
//! unstable, and qemu-arm 7 shows the host's `/proc/cpuinfo` but emulates the auxiliary vector.)
//! Shared by the kernel harnesses (`common/mod.rs`) and `tests/tests/isa.rs` (by `#[path]`).

/// See the module doc.
pub fn hwcap_neon() -> bool {
    const AT_HWCAP: usize = 16;
    const HWCAP_NEON: usize = 1 << 12;
    let auxv = std::fs::read("/proc/self/auxv").expect("/proc/self/auxv is readable");
    let word = |b: &[u8]| usize::from_ne_bytes(b.try_into().expect("one word"));
    let size = std::mem::size_of::<usize>();
    auxv.chunks_exact(2 * size)
        .find(|entry| word(&entry[..size]) == AT_HWCAP)
        .is_some_and(|entry| word(&entry[size..]) & HWCAP_NEON != 0)
}
