//! Compile-fail tests of the `network!` DSL: every file `ui/<family>/<case>.rs` holds one
//! network with exactly one mistake, and `ui/<family>/<case>.stderr` is the diagnostic it must
//! produce, pointing at the offending token.
//!
//! Families: `shape/` (shape inference), `names/` (undefined or duplicate names, unknown
//! operations), `args/` (operation arguments), `tensor/` (the general tensor type and the
//! shape-generic ops), `seq/` (sequences: positions checked at compile time, element types,
//! concatenation), `types/` (the `fm<...>` / `vec<...>` types and
//! dtypes), `syntax/` (parse errors) and `weights/` (the safetensors file checked at compile
//! time, with its tiny fixtures written by `scripts/gen_ui_weights.py`).
//!
//! After a deliberate change to a message, re-bless with
//! `TRYBUILD=overwrite cargo test -p kiln-tests --test ui` and read every changed `.stderr`.

#[test]
fn ui() {
    // The glob is relative to this crate's root (`tests/`), where trybuild runs.
    let t = trybuild::TestCases::new();
    t.compile_fail("ui/*/*.rs");
}
