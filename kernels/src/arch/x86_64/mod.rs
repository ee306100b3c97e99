//! x86_64 kernels: `avx2` needs AVX2 and FMA; `avx512` needs AVX-512F on top of those.

/// The GEMM entries of one x86 ISA, from its micro-kernel type: the parallel task's entry
/// (`part`, which `MicroKernel::part` forwards to), `gemm` and `gemm_par` (its safe table
/// entries) and the `#[target_feature]` function between them. The AVX2 and AVX-512 files
/// differ only in these names.
macro_rules! gemm_entries {
    ($kernel:ty, $features:literal) => {
        /// [`blis::gemm_part_in`] compiled for this ISA: the body of every GEMM task, on
        /// the packed-panel buffer `blis::with_panel` gives it.
        ///
        /// # Safety
        ///
        /// The CPU has the features below; as for [`blis::gemm_part_in`].
        #[inline(never)]
        #[target_feature(enable = $features)]
        unsafe fn part<B: PackB>(
            g: &blis::Shared<'_>,
            b: &B,
            task: usize,
            split: blis::Split,
            panel: &mut [f32],
        ) {
            // SAFETY: forwarded from the caller.
            unsafe { blis::gemm_part_in::<$kernel, NR, B>(g, b, task, split, panel) }
        }

        /// `C = A B` on this ISA.
        ///
        /// # Safety
        ///
        /// The features below are available.
        #[target_feature(enable = $features)]
        unsafe fn gemm_compiled(
            par: &dyn Parallel,
            m: usize,
            n: usize,
            k: usize,
            a: &[f32],
            b: &[f32],
            c: &mut [f32],
        ) {
            let g = blis::Gemm {
                m,
                n,
                k,
                a,
                lda: k,
                a_blocked: false,
                c,
                ldc: n,
                bias: Bias::None,
                res: None,
                act: Activation::None,
            };
            // SAFETY: the features are available (this function's contract).
            unsafe {
                blis::gemm_par::<$kernel, NR, _>(
                    par,
                    g,
                    &RowMajor {
                        data: b,
                        ld: n,
                        in_place: false,
                    },
                )
            };
        }

        /// `C[m, n] = A[m, k] * B[k, n]`, overwriting `C`; see [`crate::gemm`].
        pub(crate) fn gemm(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
            gemm_par(&Serial, m, n, k, a, b, c);
        }

        /// [`gemm`] with its output split among `par`'s threads.
        pub(crate) fn gemm_par(
            par: &dyn Parallel,
            m: usize,
            n: usize,
            k: usize,
            a: &[f32],
            b: &[f32],
            c: &mut [f32],
        ) {
            assert!(
                holds(a.len(), &[m, k]) && holds(b.len(), &[k, n]) && holds(c.len(), &[m, n]),
                "gemm: short slice"
            );
            if m == 0 || n == 0 {
                return;
            }
            // SAFETY: only reachable through a table built after detecting these features
            // (crate::table).
            unsafe { gemm_compiled(par, m, n, k, a, b, c) }
        }
    };
}

/// `$f::<R>($t)` for `R = $t.rows`, one arm per row count listed (the rest, 1, last): the
/// tiles and dot products are compiled per row count, so the accumulators are fixed
/// registers.
macro_rules! by_rows {
    ($f:ident, $t:expr; $($r:literal)+) => {
        match $t.rows {
            $( $r => $f::<$r>($t), )+
            _ => $f::<1>($t),
        }
    };
}

/// The `conv2d` entries of one x86 ISA, from its vector type: `conv2d`, `conv2d_par`,
/// `conv2d_res` and `conv2d_res_par` (the table's safe entries), the depthwise branch, and the
/// `#[target_feature]` function in front of the GEMM branches (`avx2::im2col::conv2d_gemm`).
/// The AVX2 and AVX-512 files differ only in these names.
macro_rules! conv_entries {
    ($lanes:ty, $features:literal) => {
        /// The GEMM branches for this ISA.
        ///
        /// # Safety
        ///
        /// The features below are available.
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)] // conv2d's contract plus the threads and the residual.
        unsafe fn conv2d_compiled(
            par: &dyn Parallel,
            p: &Conv2d,
            input: &[f32],
            weight: &[f32],
            bias: Option<&[f32]>,
            res: Option<&[f32]>,
            act: Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            // SAFETY: the features are available (this function's contract).
            unsafe {
                // A stride-1 convolution the padded-input GEMM takes (small maps, few output
                // channels: `avx2::flat`), else the GEMM per (image, group) of
                // `avx2::im2col::conv2d_gemm` (stride-2 ones through their input's phases).
                if crate::arch::x86_64::avx2::flat::conv2d_flat::<$lanes, NR>(
                    par, p, input, weight, bias, res, act, scratch, out,
                ) {
                    return;
                }
                conv2d_gemm::<$lanes, NR>(
                    <$lanes>::new(),
                    par,
                    p,
                    input,
                    weight,
                    bias,
                    res,
                    act,
                    scratch,
                    out,
                )
            }
        }

        /// Convolution; see [`crate::conv2d`].
        pub(crate) fn conv2d(
            p: &Conv2d,
            input: &[f32],
            weight: &[f32],
            bias: Option<&[f32]>,
            act: Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            conv2d_par(&Serial, p, input, weight, bias, act, scratch, out);
        }

        /// [`conv2d`] with its GEMMs split among `par`'s threads (depthwise convolutions run on the
        /// calling thread).
        #[allow(clippy::too_many_arguments)] // conv2d's contract plus the threads.
        pub(crate) fn conv2d_par(
            par: &dyn Parallel,
            p: &Conv2d,
            input: &[f32],
            weight: &[f32],
            bias: Option<&[f32]>,
            act: Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            conv2d_any(par, p, input, weight, bias, None, act, scratch, out);
        }

        /// [`crate::conv2d_res`]: [`conv2d`] with a residual operand added in the GEMM's epilogue.
        #[allow(clippy::too_many_arguments)] // conv2d's contract plus the residual.
        pub(crate) fn conv2d_res(
            p: &Conv2d,
            input: &[f32],
            weight: &[f32],
            bias: Option<&[f32]>,
            residual: &[f32],
            act: Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            conv2d_res_par(&Serial, p, input, weight, bias, residual, act, scratch, out);
        }

        /// [`conv2d_res`] with its GEMMs split among `par`'s threads.
        #[allow(clippy::too_many_arguments)] // conv2d's contract plus the threads and the residual.
        pub(crate) fn conv2d_res_par(
            par: &dyn Parallel,
            p: &Conv2d,
            input: &[f32],
            weight: &[f32],
            bias: Option<&[f32]>,
            residual: &[f32],
            act: Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            p.check_residual(residual);
            conv2d_any(
                par,
                p,
                input,
                weight,
                bias,
                Some(residual),
                act,
                scratch,
                out,
            );
        }

        #[allow(clippy::too_many_arguments)] // conv2d's contract plus the threads and the residual.
        fn conv2d_any(
            par: &dyn Parallel,
            p: &Conv2d,
            input: &[f32],
            weight: &[f32],
            bias: Option<&[f32]>,
            res: Option<&[f32]>,
            act: Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            p.check_operands(input, weight, bias, out);
            if p.is_depthwise() {
                // The depthwise kernels have no residual epilogue (the compiler never fuses one
                // there): the residual and the activation are a second pass.
                let act_now = if res.is_some() { Activation::None } else { act };
                super::depthwise::depthwise_conv2d(p, input, weight, bias, act_now, scratch, out);
                if let Some(r) = res {
                    crate::arch::portable::epilogue::add_residual(p, out, r, act);
                }
                return;
            }
            // A stem (3x3 stride 2 over a few channels) runs its direct kernel, if it takes it.
            if super::stem::stem_conv2d(par, p, input, weight, bias, res, act, out) {
                return;
            }
            // SAFETY: only reachable through a table built after detecting these features
            // (crate::table).
            unsafe { conv2d_compiled(par, p, input, weight, bias, res, act, scratch, out) }
        }
    };
}

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

/// `conv2d_nchwc_winograd` for one x86 table: the portable blocked Winograd convolution
/// ([`crate::nchwc::winograd::conv2d`]) compiled with the ISA's target features and its GEMM,
/// as [`winograd_entry`] does for the NCHW one; defines the serial entry and the threaded one.
macro_rules! winograd_nchwc_entry {
    ($features:literal, $gemm:path, $token:ty) => {
        /// Blocked Winograd convolution; see [`crate::nchwc::winograd::conv2d`].
        #[allow(clippy::too_many_arguments)] // The table entry's contract.
        pub(crate) fn conv2d_nchwc_winograd(
            p: &crate::Conv2d,
            input: &[f32],
            u: &[f32],
            bias: Option<&[f32]>,
            residual: Option<&[f32]>,
            act: crate::Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            conv2d_nchwc_winograd_par(
                &crate::par::Serial,
                p,
                input,
                u,
                bias,
                residual,
                act,
                scratch,
                out,
            );
        }

        /// [`conv2d_nchwc_winograd`] with each block's steps split among `par`'s threads.
        #[allow(clippy::too_many_arguments)] // The table entry's contract plus the threads.
        pub(crate) fn conv2d_nchwc_winograd_par(
            par: &dyn crate::par::Parallel,
            p: &crate::Conv2d,
            input: &[f32],
            u: &[f32],
            bias: Option<&[f32]>,
            residual: Option<&[f32]>,
            act: crate::Activation,
            scratch: &mut [f32],
            out: &mut [f32],
        ) {
            use crate::arch::portable::winograd_nchwc::{conv2d_with, Block, Compiled, Step};

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
                // SAFETY: the caller's contract: the CPU has the token's features.
                let s = unsafe { <$token>::new_unchecked() };
                // SAFETY: forwarded from the caller.
                unsafe { crate::arch::x86_64::simd::winograd_nchwc::task(s, b, step, i) }
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
                residual: Option<&[f32]>,
                act: crate::Activation,
                scratch: &mut [f32],
                out: &mut [f32],
            ) {
                conv2d_with::<Isa>($gemm, par, p, input, u, bias, residual, act, scratch, out);
            }
            // SAFETY: only reachable through a table built after detecting these features
            // (crate::table).
            unsafe { compiled(par, p, input, u, bias, residual, act, scratch, out) }
        }
    };
}

pub mod avx2;
pub mod avx512;
mod cache;

/// `Kernels::few_tiles_winograd` for the AVX-512 table on this CPU: not on Intel's cores (see
/// there). Zen 5, whose zmm FMAs are full width too, was not measured and keeps Winograd.
#[cfg(feature = "std")]
pub(crate) fn few_tiles_winograd_512() -> bool {
    !cache::intel()
}
mod simd;
