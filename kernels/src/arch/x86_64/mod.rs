//! x86_64 kernels: `avx2` needs AVX2 and FMA; `avx512` needs AVX-512F on top of those.

/// `conv2d_winograd` for one x86 table: the portable Winograd convolution
/// ([`crate::winograd::conv2d`]) compiled with the ISA's target features, with the ISA's own
/// GEMM for the 36 products, behind the safe entry the table holds. One definition, so the
/// AVX2 and AVX-512 entries cannot drift apart.
macro_rules! winograd_entry {
    ($features:literal, $gemm:path) => {
        /// Winograd convolution; see [`crate::winograd::conv2d`].
        pub(crate) fn conv2d_winograd(
            p: &crate::Conv2d,
            input: &[f32],
            u: &[f32],
            bias: Option<&[f32]>,
            act: crate::Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            conv2d_winograd_par(&crate::par::Serial, p, input, u, bias, act, scratch, out);
        }

        /// [`conv2d_winograd`] with each block's steps split among `par`'s threads.
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn conv2d_winograd_par(
            par: &dyn crate::par::Parallel,
            p: &crate::Conv2d,
            input: &[f32],
            u: &[f32],
            bias: Option<&[f32]>,
            act: crate::Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            use crate::arch::portable::winograd::{block_task, conv2d_with, Block, Compiled, Step};

            /// A block's tasks compiled for this ISA.
            struct Isa;

            impl Compiled for Isa {
                #[inline(always)]
                unsafe fn task(b: &Block<'_>, step: Step, i: usize) {
                    // SAFETY: forwarded from the caller (the features, one run per task).
                    unsafe { task(b, step, i) }
                }
            }

            /// # Safety
            ///
            /// The target features named above are available; as for `block_task`.
            #[target_feature(enable = $features)]
            unsafe fn task(b: &Block<'_>, step: Step, i: usize) {
                // SAFETY: forwarded from the caller.
                unsafe { block_task(b, step, i) }
            }

            /// # Safety
            ///
            /// The target features named above are available.
            #[allow(clippy::too_many_arguments)]
            #[target_feature(enable = $features)]
            unsafe fn compiled(
                par: &dyn crate::par::Parallel,
                p: &crate::Conv2d,
                input: &[f32],
                u: &[f32],
                bias: Option<&[f32]>,
                act: crate::Activation,
                scratch: &mut [f32],
                out: &mut [f32],
            ) {
                conv2d_with::<Isa>($gemm, par, p, input, u, bias, act, scratch, out);
            }
            // SAFETY: only reachable through a table built after detecting these features
            // (crate::table).
            unsafe { compiled(par, p, input, u, bias, act, scratch, out) }
        }
    };
}

pub mod avx2;
pub mod avx512;
mod cache;
mod simd;
