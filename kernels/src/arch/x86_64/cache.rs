//! The per-core L2 size that the x86 GEMM's panel width depends on (`avx2::blis`), and
//! whether the CPU is Intel's (which decides when the GEMM reads `B` in place), read once
//! from CPUID.
//!
//! Leaf 4 (Intel) and leaf `0x8000_001D` (AMD) describe the caches in the same format: one
//! subleaf per cache, its type and level in EAX, ways, partitions and line size in EBX, sets
//! in ECX. CPUID is an instruction, not an OS service, so this works without `std`; a CPU or
//! hypervisor that describes no L2 gets [`L2_DEFAULT`].

use core::arch::x86_64::__cpuid_count;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Assumed when CPUID describes no L2: 1 MiB, as on AMD Zen 4 and many Intel server cores.
pub(crate) const L2_DEFAULT: usize = 1 << 20;

/// The detected size, 0 until the first call.
static L2: AtomicUsize = AtomicUsize::new(0);

/// Bytes of L2 cache per core (data or unified).
pub(crate) fn l2_bytes() -> usize {
    cached(&L2, || detect().unwrap_or(L2_DEFAULT))
}

/// `cell`'s value, computed by `f` (never 0) on the first call. Every thread computes the
/// same value, so a race only repeats the work.
fn cached(cell: &AtomicUsize, f: impl FnOnce() -> usize) -> usize {
    match cell.load(Ordering::Relaxed) {
        0 => {
            let found = f();
            cell.store(found, Ordering::Relaxed);
            found
        }
        known => known,
    }
}

/// 0 until the first call of [`intel`], then 1 (no) or 2 (yes).
static INTEL: AtomicUsize = AtomicUsize::new(0);

/// Whether the CPU's vendor string (CPUID leaf 0) is `GenuineIntel`.
///
/// The x86 GEMM uses it where the fastest choice measured differently on the two vendors'
/// cores, which differ in more than their features: Intel's server cores with AVX-512 run
/// two 512-bit FMAs per cycle, AMD's Zen 4 one, so on Intel every cycle a tile waits for
/// memory costs twice the work (`avx2::blis::reads_in_place`).
pub(crate) fn intel() -> bool {
    cached(&INTEL, || {
        let [_, ebx, ecx, edx] = cpuid(0, 0);
        // "GenuineIntel" in EBX, EDX, ECX order.
        1 + usize::from([ebx, edx, ecx] == [0x756e_6547, 0x4965_6e69, 0x6c65_746e])
    }) == 2
}

/// The L2 size from whichever of the two leaves the CPU implements and fills in.
fn detect() -> Option<usize> {
    let max_basic = cpuid(0, 0)[0];
    let max_ext = cpuid(0x8000_0000, 0)[0];
    // AMD returns zeros for leaf 4, so trying it first is harmless there.
    [(max_basic >= 4, 4), (max_ext >= 0x8000_001D, 0x8000_001D)]
        .into_iter()
        .filter(|&(implemented, _)| implemented)
        .find_map(|(_, leaf)| l2_in(leaf))
}

/// The L2 entry of cache-description leaf `leaf`, if it lists one.
fn l2_in(leaf: u32) -> Option<usize> {
    for sub in 0..16 {
        let [eax, ebx, ecx, _] = cpuid(leaf, sub);
        let kind = eax & 0x1f;
        if kind == 0 {
            break; // no more caches
        }
        let level = (eax >> 5) & 0x7;
        // Type 1 is a data cache, 3 a unified one.
        if level == 2 && (kind == 1 || kind == 3) {
            let field =
                |v: u32, shift: u32, bits: u32| ((v >> shift) & ((1 << bits) - 1)) as usize + 1;
            let (line, partitions, ways) =
                (field(ebx, 0, 12), field(ebx, 12, 10), field(ebx, 22, 10));
            let sets = ecx as usize + 1;
            return Some(ways * partitions * line * sets);
        }
    }
    None
}

/// CPUID `leaf`, `sub` as `[eax, ebx, ecx, edx]`.
fn cpuid(leaf: u32, sub: u32) -> [u32; 4] {
    #[allow(unused_unsafe)] // `__cpuid_count` is a safe function on newer toolchains.
    // SAFETY: CPUID exists on every x86_64 CPU; leaves are only read below the maximum the CPU
    // reports (`detect`), and an unknown one just returns zeros or another leaf's values.
    let r = unsafe { __cpuid_count(leaf, sub) };
    [r.eax, r.ebx, r.ecx, r.edx]
}

#[cfg(all(test, feature = "std"))]
mod tests {
    #[test]
    fn intel_matches_proc_cpuinfo_where_linux_reports_it() {
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let Some(vendor) = info.lines().find(|l| l.starts_with("vendor_id")) else {
            return;
        };
        assert_eq!(super::intel(), vendor.ends_with("GenuineIntel"), "{vendor}");
        assert_eq!(super::intel(), super::intel(), "the cached value is stable");
    }

    #[test]
    fn l2_matches_sysfs_where_linux_reports_it() {
        let l2 = super::l2_bytes();
        assert_eq!(l2, super::l2_bytes(), "the cached value is stable");
        assert!(
            (64 << 10..=64 << 20).contains(&l2),
            "implausible L2 size {l2}"
        );
        // Linux reads the same CPUID leaves, so where it exposes them the sizes agree.
        let Ok(level) = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/level")
        else {
            return;
        };
        let size = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index2/size")
            .expect("index2 has a size");
        if level.trim() == "2" {
            let kib: usize = size
                .trim()
                .trim_end_matches('K')
                .parse()
                .expect("size in KiB");
            assert_eq!(l2, kib << 10);
        }
    }
}
