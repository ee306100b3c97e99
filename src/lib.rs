//! kiln: a compile-time neural-network compiler.
//!
//! Describe a network with [`network!`]; at compile time kiln infers every shape, plans all
//! intermediate memory into one arena, verifies the plan and expands to straight-line Rust
//! calling specialised kernels. See the README for the DSL and `ARCHITECTURE.md` for the design.

pub use kiln_macros::network;
pub use kiln_runtime::{isa, Arena, AsInput, Error, Scalar, Seq, SeqBuf, Tensor};

/// Everything generated code names, and nothing else. Not a public API: it may change in any
/// release.
#[doc(hidden)]
pub mod __private {
    pub use kiln_runtime::__private::*;
    pub use kiln_runtime::kernels;
}
