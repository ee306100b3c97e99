//! What kernel harnesses share: the ISA tables to test against the portable reference, and a
//! small reproducible generator. (Each harness compiles this module on its own and uses part
//! of it, hence the `dead_code` allowances.)

use std::sync::Mutex;

#[cfg(target_arch = "arm")]
mod auxv;

use kiln_kernels::{for_isa, Isa, Kernels};

/// The tables this CPU can run, other than the reference. Prints, once per `test` name, which
/// ISAs ran and which were skipped (not available on this CPU), so a CI log shows what was
/// proved.
#[allow(dead_code)]
pub fn isas(test: &'static str) -> Vec<Kernels> {
    static REPORTED: Mutex<Vec<&str>> = Mutex::new(Vec::new());
    let (ran, skipped): (Vec<Isa>, Vec<Isa>) = Isa::ALL
        .into_iter()
        .filter(|&isa| isa != Isa::Portable)
        .partition(|isa| isa.is_available());
    // On 32-bit arm kiln detects NEON itself (`getauxval`), so a broken detection would make
    // every harness skip the NEON table quietly; the CPU's own report must agree with it.
    #[cfg(target_arch = "arm")]
    assert_eq!(
        Isa::Neon.is_available(),
        auxv::hwcap_neon(),
        "kiln's NEON detection disagrees with /proc/self/auxv"
    );
    let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    if !reported.contains(&test) {
        reported.push(test);
        println!("{test}: ran: {ran:?} skipped: {skipped:?}");
    }
    ran.into_iter().filter_map(for_isa).collect()
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
