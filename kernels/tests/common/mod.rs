//! What kernel harnesses share: the ISA tables to test against the portable reference, and a
//! small reproducible generator. (Each harness compiles this module on its own and uses part
//! of it, hence the `dead_code` allowances.)

use std::sync::Mutex;

#[cfg(target_arch = "arm")]
mod auxv;

use kiln_kernels::{for_isa, Activation, Isa, Kernels};

/// The tables this CPU can run, other than the reference. Prints, once per `test` name, which
/// ISAs ran and which were skipped (not available on this CPU), so a CI log shows what was
/// proved. Panics if the CPU has SIMD but the crate offers none of it (built without
/// detection), so a harness never passes having tested only the reference against itself.
#[allow(dead_code)]
pub fn isas(test: &'static str) -> Vec<Kernels> {
    static REPORTED: Mutex<Vec<&str>> = Mutex::new(Vec::new());
    let (ran, skipped): (Vec<Isa>, Vec<Isa>) = Isa::ALL
        .into_iter()
        .filter(|&isa| isa != Isa::Portable)
        .partition(|isa| isa.is_available());
    assert!(
        !cpu_has_simd() || !ran.is_empty(),
        "{test}: this CPU has SIMD, but kiln-kernels offers none of its ISAs: the crate was \
         built without run-time detection (the `std` feature, which kernels/Cargo.toml turns on \
         for its tests through a dev-dependency on itself)"
    );
    let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    if !reported.contains(&test) {
        reported.push(test);
        println!("{test}: ran: {ran:?} skipped: {skipped:?}");
    }
    ran.into_iter().filter_map(for_isa).collect()
}

/// Whether the test process (which always has `std`) detects a SIMD ISA kiln has kernels for.
fn cpu_has_simd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("neon")
    }
    // kiln's own `getauxval` detection would make every harness skip NEON quietly if it
    // broke; this is the CPU's report read another way.
    #[cfg(target_arch = "arm")]
    {
        auxv::hwcap_neon()
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "arm")))]
    {
        false
    }
}

/// xorshift32: reproducible data from a proptest-chosen seed.
#[allow(dead_code)]
pub struct Rng(u32);

#[allow(dead_code)]
impl Rng {
    pub fn new(seed: u32) -> Self {
        Rng(seed | 1)
    }
    pub fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
    pub fn below(&mut self, n: usize) -> usize {
        self.next() as usize % n
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * (self.next() >> 8) as f64 / (1u32 << 24) as f64
    }
}

/// Whether `f` panics with a length check's message (they all say "short"), rather than
/// returning or failing somewhere else (an index out of bounds further in).
#[allow(dead_code)]
pub fn refused_as_short(f: impl FnOnce() + std::panic::UnwindSafe) -> bool {
    match std::panic::catch_unwind(f) {
        Ok(()) => false,
        Err(payload) => payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .is_some_and(|m| m.contains("short")),
    }
}

/// One activation of each kind the epilogues distinguish.
#[allow(dead_code)]
pub const ACTS: [Activation; 6] = [
    Activation::None,
    Activation::Relu,
    Activation::Clip {
        min: -0.5,
        max: 0.75,
    },
    Activation::LeakyRelu { alpha: 0.1 },
    Activation::Sigmoid,
    Activation::Tanh,
];
