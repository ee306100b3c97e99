//! Front ends: each turns one source of models into an untyped [`crate::ir::Graph`] plus its own
//! table of locations, and renders the diagnostics the passes report at those locations.
//!
//! * [`dsl`] — the `network!` DSL (the macro today; `.kiln` files later), locations are spans.

pub mod args;
pub mod dsl;
