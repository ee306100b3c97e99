//! Front ends: each turns one source of models into an untyped [`crate::ir::Graph`] plus its own
//! table of locations, and renders the diagnostics the passes report at those locations.
//!
//! * [`dsl`] — the `network!` DSL (the macro and `.kiln` files), locations are spans.
//! * [`onnx`] (feature `onnx`) — ONNX models, locations are node descriptions.

pub mod args;
pub mod dsl;
#[cfg(feature = "onnx")]
pub mod onnx;
#[cfg(feature = "onnx")]
pub mod onnx_proto;
