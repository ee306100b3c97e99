//! The depthwise, element-wise, normalisation and pooling kernels of both x86_64 ISAs,
//! written once against the lane-width abstraction in [`vector`].
//!
//! `avx2/{depthwise,eltwise,norm,pool}.rs` and their `avx512` twins are thin: each safe table
//! entry calls a `#[target_feature]` function that makes the ISA's token and runs the generic
//! kernel from here. Everything in this module is `#[inline(always)]`, so the whole kernel is
//! compiled inside that function, with its features; nothing here is ever called from code
//! compiled without them. One generic body per family means the AVX-512 kernels are the AVX2
//! ones with 16 lanes: the tests that run the AVX2 path on a machine without AVX-512 exercise
//! all of their logic but the per-instruction mapping in [`vector`].

pub(crate) mod depthwise;
pub(crate) mod eltwise;
#[cfg(test)]
mod emu;
pub(crate) mod math;
pub(crate) mod norm;
pub(crate) mod pool;
#[cfg(test)]
mod tests;
pub(crate) mod vector;

/// Defines one ISA's table entries: for each `fn name(args) => kernel;`, a safe `pub(crate)`
/// function `name(args)` for the table, and behind it a `#[target_feature(enable = features)]`
/// entry point that makes the ISA's token and calls `kernel(token, args)`.
///
/// The safe functions are sound because the table code ([`crate::table`]) only hands out
/// tables holding them after detecting `features`; that is the single `unsafe` argument of
/// every entry, so it is written once, here.
macro_rules! isa_entries {
    (
        features: $features:literal,
        token: $token:ty;
        $(
            $(#[$attr:meta])*
            fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $kernel:path;
        )*
    ) => {
        $(
            $(#[$attr])*
            pub(crate) fn $name($($arg: $ty),*) {
                // SAFETY: only reachable through a table built after detecting `$features`
                // (crate::table), which is the entry point's contract.
                unsafe { isa::$name($($arg),*) }
            }
        )*

        /// The `#[target_feature]` entry points behind the table entries.
        mod isa {
            use super::*;
            $(
                $(#[$attr])*
                ///
                /// # Safety
                ///
                /// The CPU must support every feature this function is compiled with.
                #[target_feature(enable = $features)]
                pub(super) unsafe fn $name($($arg: $ty),*) {
                    // SAFETY: this function's contract is that the CPU has the features the
                    // token stands for.
                    let s = unsafe { <$token>::new_unchecked() };
                    $kernel(s, $($arg),*)
                }
            )*
        }
    };
}
pub(crate) use isa_entries;
