//! The per-core L2 size that the x86 GEMM's panel width depends on (`avx2::blis`), the L1d
//! size its depth blocks depend on, whether
//! the core runs 512-bit FMAs at full width (which decides when the GEMM reads `B` in place)
//! and whether the CPU is Intel's (which decides a pooling path), read once from CPUID.
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
    cached(&L2, || detect(2).unwrap_or(L2_DEFAULT))
}

/// The detected L1d size, 0 until the first call.
static L1D: AtomicUsize = AtomicUsize::new(0);

/// Bytes of L1 data cache per core; 32 KiB, the smallest of the cores kiln's x86 kernels
/// target, if CPUID does not say.
pub(crate) fn l1d_bytes() -> usize {
    cached(&L1D, || detect(1).unwrap_or(32 << 10))
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
/// The kernels use it where the fastest choice measured differently on the two vendors'
/// cores for a reason their features do not tell: Intel's run every shuffle on one port, so
/// the small-plane pooling path, a permute per window tap, loses to the flat one on stride-1
/// planes one vector wide (`simd::pool_small::takes`; on AMD Zen 4 and Zen 5 it wins). Intel's
/// cores with AVX-512 are also [`full_width_512`].
pub(crate) fn intel() -> bool {
    cached(&INTEL, || 1 + usize::from(vendor_is(b"GenuineIntel"))) == 2
}

/// 0 until the first call of [`amd`], then 1 (no) or 2 (yes).
static AMD: AtomicUsize = AtomicUsize::new(0);

/// Whether the CPU's vendor string (CPUID leaf 0) is `AuthenticAMD`: for the rules measured
/// on AMD's cores only (`simd::stem_lanes::takes`), which another vendor's would not follow.
pub(crate) fn amd() -> bool {
    cached(&AMD, || 1 + usize::from(vendor_is(b"AuthenticAMD"))) == 2
}

/// Whether the CPU's vendor string, CPUID leaf 0's EBX, EDX and ECX in that order, is
/// `name`.
fn vendor_is(name: &[u8; 12]) -> bool {
    let [_, ebx, ecx, edx] = cpuid(0, 0);
    let mut vendor = [0u8; 12];
    for (part, reg) in vendor.chunks_exact_mut(4).zip([ebx, edx, ecx]) {
        part.copy_from_slice(&reg.to_le_bytes());
    }
    &vendor == name
}

/// 0 until the first call of [`full_width_512`], then 1 (no) or 2 (yes).
static FULL_WIDTH_512: AtomicUsize = AtomicUsize::new(0);

/// Whether the core executes a 512-bit FMA at full width, two per cycle, so that a zmm tile
/// does its FMAs in half the cycles of a ymm one: Intel's cores with AVX-512 and AMD's from
/// Zen 5 on ([`amd_full_width`]), but not AMD Zen 4, which splits every zmm FMA over its
/// two 256-bit pipes.
///
/// On such a core every cycle a tile waits for memory costs twice the work it costs on Zen 4,
/// so the GEMM packs `B` where Zen 4 reads it in place (`avx2::blis::reads_in_place`).
/// Measured as the FMA peak of the kernel bench's register-only loops, AVX-512 over AVX2: 2.0
/// on Intel Xeon (family 6 models 167 and 207) and AMD EPYC Zen 5 (family 26 model 2, 230
/// against 115 GFLOP/s), 1.0 on AMD EPYC Zen 4 (family 25 model 17).
pub(crate) fn full_width_512() -> bool {
    cached(&FULL_WIDTH_512, || {
        let (family, model) = family_model();
        1 + usize::from(intel() || (amd() && amd_full_width(family, model)))
    }) == 2
}

/// Whether an AMD core of `family` and `model` (as [`family_model`] decodes them) executes
/// 512-bit FMAs at full width: Zen 5 (family 0x1A) and later, except Zen 5's mobile parts
/// (Strix Point, models 0x20-0x2F, and Krackan Point, 0x60-0x6F), which AMD built with Zen 4's
/// 256-bit datapath. Zen 4 (family 0x19) and earlier do not.
fn amd_full_width(family: u32, model: u32) -> bool {
    match family {
        0x1A => !matches!(model, 0x20..=0x2F | 0x60..=0x6F),
        f => f > 0x1A,
    }
}

/// The display family and model from CPUID leaf 1, as Linux's `/proc/cpuinfo` shows them:
/// the extended family is added to a base family of 0xF, and the extended model is the high
/// nibble of the model for base families 0x6 and 0xF.
fn family_model() -> (u32, u32) {
    let eax = cpuid(1, 0)[0];
    let base_family = (eax >> 8) & 0xF;
    let base_model = (eax >> 4) & 0xF;
    let family = match base_family {
        0xF => base_family + ((eax >> 20) & 0xFF),
        f => f,
    };
    let model = match base_family {
        0x6 | 0xF => base_model | (((eax >> 16) & 0xF) << 4),
        _ => base_model,
    };
    (family, model)
}

/// The size of the level-`level` data (or unified) cache from whichever of the two leaves the
/// CPU implements and fills in.
fn detect(level: u32) -> Option<usize> {
    let max_basic = cpuid(0, 0)[0];
    let max_ext = cpuid(0x8000_0000, 0)[0];
    // AMD returns zeros for leaf 4, so trying it first is harmless there.
    [(max_basic >= 4, 4), (max_ext >= 0x8000_001D, 0x8000_001D)]
        .into_iter()
        .filter(|&(implemented, _)| implemented)
        .find_map(|(_, leaf)| size_in(leaf, level))
}

/// The size of the level-`level` data or unified cache in cache-description leaf `leaf`, if
/// it lists one.
fn size_in(leaf: u32, want: u32) -> Option<usize> {
    for sub in 0..16 {
        let [eax, ebx, ecx, _] = cpuid(leaf, sub);
        let kind = eax & 0x1f;
        if kind == 0 {
            break; // no more caches
        }
        let level = (eax >> 5) & 0x7;
        // Type 1 is a data cache, 3 a unified one.
        if level == want && (kind == 1 || kind == 3) {
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
    use std::string::{String, ToString};

    #[test]
    fn vendor_matches_proc_cpuinfo_where_linux_reports_it() {
        let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else {
            return;
        };
        let Some(vendor) = info.lines().find(|l| l.starts_with("vendor_id")) else {
            return;
        };
        assert_eq!(super::intel(), vendor.ends_with("GenuineIntel"), "{vendor}");
        assert_eq!(super::intel(), super::intel(), "the cached value is stable");
        assert_eq!(super::amd(), vendor.ends_with("AuthenticAMD"), "{vendor}");
        assert_eq!(super::amd(), super::amd(), "the cached value is stable");
    }

    /// The first value of `key` in `/proc/cpuinfo`, if Linux reports it.
    fn cpuinfo(key: &str) -> Option<String> {
        let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let line = info
            .lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == key))?;
        Some(line.split_once(':')?.1.trim().to_string())
    }

    #[test]
    fn family_and_model_match_proc_cpuinfo_where_linux_reports_them() {
        let (Some(family), Some(model)) = (cpuinfo("cpu family"), cpuinfo("model")) else {
            return;
        };
        let (f, m) = super::family_model();
        assert_eq!((f.to_string(), m.to_string()), (family, model));
        // The vendor as Linux reports it, not as `vendor_is` reads it.
        let vendor = cpuinfo("vendor_id").unwrap_or_default();
        let full_width =
            vendor == "GenuineIntel" || (vendor == "AuthenticAMD" && super::amd_full_width(f, m));
        assert_eq!(super::full_width_512(), full_width, "{vendor} {f} {m}");
    }

    #[test]
    fn full_width_amd_cores() {
        use super::amd_full_width;
        assert!(
            !amd_full_width(0x19, 0x11),
            "Zen 4 (EPYC Genoa) splits zmm FMAs"
        );
        assert!(!amd_full_width(0x17, 0x31), "Zen 2 has no AVX-512 at all");
        assert!(amd_full_width(0x1A, 0x02), "Zen 5 (EPYC Turin)");
        assert!(amd_full_width(0x1A, 0x44), "Zen 5 (Ryzen 9000)");
        assert!(!amd_full_width(0x1A, 0x24), "Zen 5 mobile (Strix Point)");
        assert!(amd_full_width(0x1B, 0x00), "later families");
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
        if let Some(kib) = sysfs_cache_kib(2, "Unified") {
            assert_eq!(l2, kib << 10);
        }
    }

    #[test]
    fn l1d_matches_sysfs_where_linux_reports_it() {
        let l1d = super::l1d_bytes();
        assert_eq!(l1d, super::l1d_bytes(), "the cached value is stable");
        assert!(
            (16 << 10..=256 << 10).contains(&l1d),
            "implausible L1d size {l1d}"
        );
        if let Some(kib) = sysfs_cache_kib(1, "Data") {
            assert_eq!(l1d, kib << 10);
        }
    }

    /// The size in KiB of cpu0's level-`level` cache of type `kind` as Linux lists it under
    /// `/sys/devices/system/cpu/cpu0/cache/index*`, if it does.
    fn sysfs_cache_kib(level: u32, kind: &str) -> Option<usize> {
        (0..8).find_map(|i| {
            let dir = std::format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
            let read = |f: &str| std::fs::read_to_string(std::format!("{dir}/{f}")).ok();
            let found = read("level")?.trim() == level.to_string() && read("type")?.trim() == kind;
            found.then(|| {
                read("size")
                    .expect("a listed cache has a size")
                    .trim()
                    .trim_end_matches('K')
                    .parse()
                    .expect("size in KiB")
            })
        })
    }
}
