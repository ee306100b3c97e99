//! The depthwise, element-wise, normalisation and pooling kernels of both x86_64 ISAs,
//! written once against the lane-width abstraction in [`vector`].
//!
//! The `avx2` and `avx512` folders get their entries for these families from one
//! [`simd_families!`] invocation each: each safe table entry calls a `#[target_feature]`
//! function that makes the ISA's token and runs the generic kernel from here. Everything in this module is `#[inline(always)]`, so the whole kernel is
//! compiled inside that function, with its features; nothing here is ever called from code
//! compiled without them. One generic body per family means the AVX-512 kernels are the AVX2
//! ones with 16 lanes: the tests that run the AVX2 path on a machine without AVX-512 exercise
//! all of their logic but the per-instruction mapping in [`vector`].

pub(crate) mod convert;
pub(crate) mod depthwise;
pub(crate) mod depthwise_inplace;
pub(crate) mod depthwise_lanes;
pub(crate) mod depthwise_small;
pub(crate) mod depthwise_stride2;
pub(crate) mod eltwise;
#[cfg(test)]
mod emu;
pub(crate) mod math;
pub(crate) mod norm;
pub(crate) mod pool;
pub(crate) mod pool_3x3s2;
pub(crate) mod pool_small;
pub(crate) mod stem;
mod stem_lanes;
#[cfg(test)]
mod tests;
pub(crate) mod vector;
pub(crate) mod winograd_nchwc;

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
            fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $kernel:path;
        )*
    ) => {
        $(
            $(#[$attr])*
            pub(crate) fn $name($($arg: $ty),*) $(-> $ret)? {
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
                pub(super) unsafe fn $name($($arg: $ty),*) $(-> $ret)? {
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

/// Defines one ISA's table entries for every family written here, as the modules `depthwise`,
/// `eltwise`, `norm` and `pool` of the invoking ISA folder (`avx2`, `avx512`): each entry is
/// the generic kernel of the same name in this module, compiled with `$features` and run
/// with the token `$token` (see [`isa_entries!`]). Both ISAs get the same list, so an entry
/// cannot be added to one and forgotten in the other.
macro_rules! simd_families {
    ($features:literal, $token:ident) => {
        /// Depthwise conv2d: [`crate::arch::x86_64::simd::depthwise`] with this ISA's
        /// features. `conv.rs` calls [`depthwise::depthwise_conv2d`] for convolutions with
        /// one input and one output channel per group; shapes it does not specialise run the
        /// portable kernel.
        pub(super) mod depthwise {
            use crate::arch::x86_64::simd::{depthwise, isa_entries, vector::$token};
            use crate::{Activation, Conv2d};

            isa_entries! {
                features: $features,
                token: $token;
                /// Depthwise [`crate::conv2d`]: same signature and semantics; `scratch`
                /// holds the band buffer.
                #[allow(clippy::too_many_arguments)]
                fn depthwise_conv2d(
                    p: &Conv2d,
                    input: &[f32],
                    weight: &[f32],
                    bias: Option<&[f32]>,
                    act: Activation,
                    scratch: &mut [f32],
                    out: &mut [f32],
                ) => depthwise::conv2d;
            }
        }

        /// The direct stem convolution: [`crate::arch::x86_64::simd::stem`] with this ISA's
        /// features. `conv.rs` offers it every non-depthwise convolution.
        pub(super) mod stem {
            use crate::arch::x86_64::simd::{isa_entries, stem, vector::$token};
            use crate::par::Parallel;
            use crate::{Activation, Conv2d};

            isa_entries! {
                features: $features,
                token: $token;
                /// [`crate::conv2d`] (with `res`: [`crate::conv2d_res`]) for the stems the
                /// kernel takes, its output rows split on `par`; `false`, having written
                /// nothing, for the others.
                #[allow(clippy::too_many_arguments)]
                fn stem_conv2d(
                    par: &dyn Parallel,
                    p: &Conv2d,
                    input: &[f32],
                    weight: &[f32],
                    bias: Option<&[f32]>,
                    res: Option<&[f32]>,
                    act: Activation,
                    out: &mut [f32],
                ) -> bool => stem::conv2d;
            }
        }

        /// The blocked layout's converters: [`crate::arch::x86_64::simd::convert`] with this
        /// ISA's features.
        pub(super) mod convert {
            use crate::arch::x86_64::simd::{convert, isa_entries, vector::$token};

            isa_entries! {
                features: $features,
                token: $token;
                /// [`crate::nchwc::to_blocked`].
                fn to_blocked(
                    n: usize,
                    c: usize,
                    h: usize,
                    w: usize,
                    src: &[f32],
                    dst: &mut [f32],
                ) => convert::to_blocked;
                /// [`crate::nchwc::from_blocked`].
                fn from_blocked(
                    n: usize,
                    c: usize,
                    h: usize,
                    w: usize,
                    src: &[f32],
                    dst: &mut [f32],
                ) => convert::from_blocked;
            }
        }

        /// Element-wise kernels: [`crate::arch::x86_64::simd::eltwise`] with this ISA's
        /// features.
        pub(super) mod eltwise {
            use crate::arch::x86_64::simd::{eltwise, isa_entries, vector::$token};
            use crate::{Activation, BinaryOp, Broadcast};

            isa_entries! {
                features: $features,
                token: $token;
                /// [`crate::unary`].
                fn unary(act: Activation, input: &[f32], out: &mut [f32]) => eltwise::unary;
                /// [`crate::unary_inplace`].
                fn unary_inplace(act: Activation, data: &mut [f32]) => eltwise::unary_inplace;
                /// [`crate::binary`].
                fn binary(op: BinaryOp, bc: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32])
                    => eltwise::binary;
                /// [`crate::binary_inplace`].
                fn binary_inplace(
                    op: BinaryOp,
                    bc: &Broadcast,
                    acc: &mut [f32],
                    other: &[f32],
                    acc_is_lhs: bool,
                ) => eltwise::binary_inplace;
            }
        }

        /// Scale/shift and softmax: [`crate::arch::x86_64::simd::norm`] with this ISA's
        /// features.
        pub(super) mod norm {
            use crate::arch::x86_64::simd::{isa_entries, norm, vector::$token};
            use crate::Activation;

            isa_entries! {
                features: $features,
                token: $token;
                /// [`crate::scale_shift`].
                #[allow(clippy::too_many_arguments)]
                fn scale_shift(
                    batch: usize,
                    channels: usize,
                    spatial: usize,
                    input: &[f32],
                    scale: &[f32],
                    shift: &[f32],
                    act: Activation,
                    out: &mut [f32],
                ) => norm::scale_shift;
                /// [`crate::scale_shift_inplace`].
                #[allow(clippy::too_many_arguments)]
                fn scale_shift_inplace(
                    batch: usize,
                    channels: usize,
                    spatial: usize,
                    data: &mut [f32],
                    scale: &[f32],
                    shift: &[f32],
                    act: Activation,
                ) => norm::scale_shift_inplace;
                /// [`crate::softmax`].
                fn softmax(outer: usize, len: usize, inner: usize, input: &[f32], out: &mut [f32])
                    => norm::softmax;
                /// [`crate::softmax_inplace`].
                fn softmax_inplace(outer: usize, len: usize, inner: usize, data: &mut [f32])
                    => norm::softmax_inplace;
            }
        }

        /// Pooling: [`crate::arch::x86_64::simd::pool`] with this ISA's features.
        pub(super) mod pool {
            use crate::arch::x86_64::simd::{isa_entries, pool, vector::$token};
            use crate::Pool2d;

            isa_entries! {
                features: $features,
                token: $token;
                /// [`crate::max_pool2d`].
                fn max_pool2d(p: &Pool2d, input: &[f32], out: &mut [f32]) => pool::max_pool2d;
                /// [`crate::avg_pool2d`].
                fn avg_pool2d(p: &Pool2d, input: &[f32], out: &mut [f32]) => pool::avg_pool2d;
                /// [`crate::global_avg_pool`].
                fn global_avg_pool(
                    batch: usize,
                    channels: usize,
                    spatial: usize,
                    input: &[f32],
                    out: &mut [f32],
                ) => pool::global_avg_pool;
            }
        }
    };
}
pub(crate) use simd_families;
