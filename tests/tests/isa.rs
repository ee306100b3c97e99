//! Which kernels a model uses on this machine: `kiln::isa()` must name the strongest
//! instruction set the CPU has, capped by `KILN_ISA`, and under qemu-aarch64 and qemu-arm that
//! is NEON.
//!
//! The expectation is worked out here from the standard library's feature detection and this
//! target's own ladder of ISAs, independently of kiln's selection code, so a selection that
//! silently fell back to the portable kernels (or picked an ISA the CPU lacks) fails.
//! CI runs this file natively once per forced `KILN_ISA` and, through `.ci/cross`, under
//! qemu-aarch64 and qemu-arm, where it proves the NEON table is the one chosen.

use kiln_tests::Mlp;

/// NEON from `/proc/self/auxv`, independently of kiln (one copy, shared with the kernel
/// harnesses).
#[cfg(target_arch = "arm")]
#[path = "../../kernels/tests/common/auxv.rs"]
mod auxv;

/// The ISAs this target has kernels for, weakest first, each with whether the CPU has every
/// feature its kernels use.
fn ladder() -> Vec<(&'static str, bool)> {
    #[allow(unused_mut)]
    let mut isas = vec![("portable", true)];
    #[cfg(target_arch = "x86_64")]
    {
        let avx2 = std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma");
        isas.push(("avx2", avx2));
        isas.push((
            "avx512",
            avx2 && std::arch::is_x86_feature_detected!("avx512f"),
        ));
    }
    #[cfg(target_arch = "aarch64")]
    isas.push(("neon", std::arch::is_aarch64_feature_detected!("neon")));
    #[cfg(target_arch = "arm")]
    isas.push(("neon", auxv::hwcap_neon()));
    isas
}

/// The strongest available ISA on the ladder, not above `cap` when `cap` names one of them
/// (an unknown or foreign name caps nothing, as documented for `KILN_ISA`).
fn expected(cap: Option<&str>) -> &'static str {
    let isas = ladder();
    let default = isas.len() - 1;
    let limit = cap
        .and_then(|c| isas.iter().position(|&(name, _)| name == c))
        .unwrap_or(default);
    isas[..=limit]
        .iter()
        .rev()
        .find(|&&(_, available)| available)
        .map(|&(name, _)| name)
        .unwrap_or("portable")
}

fn cap() -> Option<String> {
    std::env::var("KILN_ISA").ok().map(|s| s.trim().to_owned())
}

#[test]
fn isa_is_the_strongest_available_capped_by_kiln_isa() {
    let cap = cap();
    let want = expected(cap.as_deref());
    println!(
        "target {}: kiln::isa() = {}, KILN_ISA = {cap:?}, expected {want}",
        std::env::consts::ARCH,
        kiln::isa()
    );
    assert_eq!(kiln::isa(), want);
}

#[cfg(target_arch = "aarch64")]
#[test]
fn aarch64_selects_neon() {
    // Every aarch64 Linux CPU has Advanced SIMD, and so does qemu-aarch64's default CPU; this
    // is the check that the NEON kernels, not the portable fallback, are the ones running.
    assert!(std::arch::is_aarch64_feature_detected!("neon"));
    match cap().as_deref() {
        Some("portable") => assert_eq!(kiln::isa(), "portable"),
        _ => assert_eq!(kiln::isa(), "neon"),
    }
}

#[cfg(target_arch = "arm")]
#[test]
fn arm32_selects_neon() {
    // qemu-arm's default CPU has NEON, as do the armv7 boards kiln targets; this is the check
    // that the `asm!` NEON kernels, not the portable fallback, are the ones running.
    assert!(auxv::hwcap_neon(), "this CPU (or qemu-arm) reports no NEON");
    match cap().as_deref() {
        Some("portable") => assert_eq!(kiln::isa(), "portable"),
        _ => assert_eq!(kiln::isa(), "neon"),
    }
}

#[test]
fn a_model_runs_with_the_selected_kernels() {
    // The ISA is fixed for the process before the first model call; building and running a
    // model afterwards must not change the answer, and must produce finite probabilities
    // (softmax rows summing to 1: a check that needs no stored reference).
    let before = kiln::isa();
    let mut model = Mlp::new();
    let x: Vec<f32> = (0..60).map(|i| (i as f32 * 0.37).sin()).collect();
    let y = model.run(&x[..]).expect("mlp runs").to_vec();
    assert_eq!(y.len(), 15);
    for row in y.chunks(5) {
        let sum: f32 = row.iter().sum();
        assert!(row.iter().all(|v| v.is_finite() && *v >= 0.0), "{row:?}");
        assert!((sum - 1.0).abs() < 1e-5, "softmax row sums to {sum}");
    }
    assert_eq!(kiln::isa(), before);
}
