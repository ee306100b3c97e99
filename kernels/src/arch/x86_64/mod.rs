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
            /// # Safety
            ///
            /// The target features named above are available.
            #[allow(clippy::too_many_arguments)]
            #[target_feature(enable = $features)]
            unsafe fn compiled(
                p: &crate::Conv2d,
                input: &[f32],
                u: &[f32],
                bias: Option<&[f32]>,
                act: crate::Activation,
                scratch: &mut [f32],
                out: &mut [f32],
            ) {
                crate::arch::portable::winograd::conv2d_with(
                    $gemm, p, input, u, bias, act, scratch, out,
                );
            }
            // SAFETY: only reachable through a table built after detecting these features
            // (crate::table).
            unsafe { compiled(p, input, u, bias, act, scratch, out) }
        }
    };
}

pub mod avx2;
pub mod avx512;
mod cache;
mod simd;
