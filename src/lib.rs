//! kiln: a compile-time neural-network compiler.
//!
//! Describe a network with [`network!`]; at compile time kiln infers every shape, plans all
//! intermediate memory into one arena, verifies the plan and expands to straight-line Rust
//! calling specialised kernels. See the README for the DSL and `ARCHITECTURE.md` for the design.

pub use kiln_macros::network;
pub use kiln_runtime::{
    isa, Arena, AsInput, AsSeq, Error, PoolStats, RunSeq, Scalar, Seq, SeqBuf, Tensor, Threads,
};

/// Per-layer timing (cargo feature `profile`): run a model, then [`profile::take`] lists each op
/// it ran with its time.
#[cfg(feature = "profile")]
pub use kiln_runtime::profile;

/// Includes a model that `kiln_dsl::Builder` compiled in the build script: `include_model!("det")`
/// for `models/det.onnx` or `models/det.kiln` (the file stem). The type it defines is the same
/// as `network!`'s (`new`, `from_safetensors`, `run`, `run_in`, `ARENA_BYTES`, `PLAN`, ...):
/// a `.kiln` file's `net` name, or an ONNX model's stem in CamelCase (`det` → `Det`).
#[macro_export]
macro_rules! include_model {
    ($name:literal) => {
        ::core::include!(::core::concat!(
            ::core::env!("OUT_DIR"),
            "/kiln/",
            $name,
            ".rs"
        ));
    };
}

/// Everything generated code names, and nothing else. Not a public API: it may change in any
/// release.
#[doc(hidden)]
pub mod __private {
    pub use kiln_runtime::__private::*;
    pub use kiln_runtime::kernels;
}
