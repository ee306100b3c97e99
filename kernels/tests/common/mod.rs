//! What every kernel harness shares: the ISA tables to test against the portable reference.

use std::sync::Mutex;

use kiln_kernels::{for_isa, Isa, Kernels};

/// The tables this CPU can run, other than the reference. Prints, once per `test` name, which
/// ISAs ran and which were skipped (not available on this CPU), so a CI log shows what was
/// proved.
pub fn isas(test: &'static str) -> Vec<Kernels> {
    static REPORTED: Mutex<Vec<&str>> = Mutex::new(Vec::new());
    let (ran, skipped): (Vec<Isa>, Vec<Isa>) = Isa::ALL
        .into_iter()
        .filter(|&isa| isa != Isa::Portable)
        .partition(|isa| isa.is_available());
    let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    if !reported.contains(&test) {
        reported.push(test);
        println!("{test}: ran: {ran:?} skipped: {skipped:?}");
    }
    ran.into_iter().filter_map(for_isa).collect()
}
