//! Choosing kernels: one table of function pointers per instruction set, filled weakest to
//! strongest, and picked once.
//!
//! The table starts as the portable reference set; each ISA the CPU has (in order: AVX2+FMA,
//! then AVX-512F on x86_64; NEON on aarch64 and 32-bit arm) overwrites the entries it implements. A kernel is
//! only ever reachable through a table whose every required CPU feature was detected, so the
//! `unsafe` calls into `#[target_feature]` functions inside each ISA's safe wrappers are sound
//! (the wrappers are `pub(crate)`, and the tables are only handed out by [`for_isa`] and
//! [`best`], which check). Generated code asks for the table once, when a model is built;
//! inner loops never detect.
//!
//! With the `std` feature, detection is at run time (`is_x86_feature_detected!`,
//! `is_aarch64_feature_detected!`, `getauxval(AT_HWCAP)` on 32-bit arm) and the environment variable `KILN_ISA`
//! (`portable`, `avx2`, `avx512`, `neon`) caps the choice, so tests can prove each path runs.
//! Without `std`, the choice is what the build enables with `-C target-feature`.

use crate::pack::WeightLayout;
use crate::par::Parallel;
use crate::{Activation, BinaryOp, Broadcast, Conv2d, Pool2d};

/// An instruction set kiln has kernels for, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Plain Rust, every target.
    Portable,
    /// Advanced SIMD: aarch64's, or 32-bit arm's (`asm!` kernels, detected through `AT_HWCAP`).
    Neon,
    /// x86_64 AVX2 with FMA.
    Avx2,
    /// x86_64 AVX-512F (on top of AVX2 and FMA).
    Avx512,
}

impl Isa {
    /// Every ISA, weakest first.
    pub const ALL: [Isa; 4] = [Isa::Portable, Isa::Neon, Isa::Avx2, Isa::Avx512];

    /// The name `KILN_ISA` and reports use.
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Neon => "neon",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    pub fn from_name(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|isa| isa.name() == name)
    }

    /// Whether this CPU (or, without `std`, this build) can run the ISA's kernels: every
    /// feature any of its instructions needs is checked here.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Portable => true,
            Isa::Neon => neon_available(),
            Isa::Avx2 => avx2_available(),
            Isa::Avx512 => avx2_available() && avx512_available(),
        }
    }
}

impl core::fmt::Display for Isa {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// The kernels generated code calls, for one ISA. Same signatures as the portable functions
/// of the same names (see their docs).
#[derive(Clone, Copy, Debug)]
#[allow(clippy::type_complexity)] // Each field spells out a kernel's signature on purpose.
pub struct Kernels {
    pub isa: Isa,
    /// The layout `conv2d` reads a non-depthwise convolution's weights in; a model puts them
    /// there once, when it prepares its parameters ([`crate::pack`]).
    pub weights: WeightLayout,
    pub gemm: fn(usize, usize, usize, &[f32], &[f32], &mut [f32]),
    pub conv2d: fn(&Conv2d, &[f32], &[f32], Option<&[f32]>, Activation, &mut [f32], &mut [f32]),
    /// [`crate::conv2d_res`]: `conv2d` with a residual operand laid out as `out`, added in the
    /// epilogue after the bias and before the activation. Reads the weights in `weights`'
    /// layout, like `conv2d`.
    pub conv2d_res: ConvResFn,
    /// [`crate::winograd::conv2d`]: weights already through `winograd::transform_filter`.
    pub conv2d_winograd:
        fn(&Conv2d, &[f32], &[f32], Option<&[f32]>, Activation, &mut [f32], &mut [f32]),
    /// [`crate::nchwc::conv2d`]: a convolution in the blocked channel layout (input, residual
    /// and output NCHW16c, weights packed by [`crate::nchwc::pack_weights`]).
    pub conv2d_nchwc: NchwcConvFn,
    /// [`crate::nchwc::winograd::conv2d`]: a 3x3 stride-1 convolution in the blocked layout
    /// through Winograd F(4x4, 3x3), weights through `nchwc::winograd::transform_filter`.
    pub conv2d_nchwc_winograd: NchwcWinogradFn,
    /// [`crate::nchwc::to_blocked`]: an NCHW tensor `[n, c, h, w]` into NCHW16c.
    pub to_blocked: ConvertFn,
    /// [`crate::nchwc::from_blocked`]: an NCHW16c tensor back into NCHW.
    pub from_blocked: ConvertFn,
    /// Whether models run their blocked-layout plan on this table: the compiler plans a
    /// network twice when some of its convolutions gain from NCHW16c (once all NCHW, once with
    /// those convolutions blocked), and generated code runs the blocked one where this is set.
    /// Set where the blocked plans measured faster end to end (AVX-512, AVX2);
    /// `KILN_LAYOUT=blocked` or `=nchw` overrides it (tests run both plans on every ISA).
    pub blocked: bool,
    /// How the generated code runs the Winograd layers whose choice depends on the CPU
    /// (wide 3x3 layers on small maps, few tiles: the compiler's `contract::few_tiles`):
    /// through Winograd where set, else through im2col + GEMM, both weight preparations being
    /// in the parameters. Unset on AVX-512 on Intel, whose two 512-bit FMA ports do the
    /// Winograd products in half the time while the transformed filters (four times the
    /// direct ones, read once per run) still come from memory: there ResNet-50's five 256 ->
    /// 256 layers at 14x14 ran faster through im2col (3-4.5 % end to end), on AMD Zen 4 slower
    /// (3 %). `KILN_FEW_TILES=winograd` or `=im2col` overrides it (tests run both).
    pub few_tiles_winograd: bool,
    pub dense: fn(usize, usize, usize, &[f32], &[f32], Option<&[f32]>, Activation, &mut [f32]),
    pub unary: fn(Activation, &[f32], &mut [f32]),
    pub unary_inplace: fn(Activation, &mut [f32]),
    pub binary: fn(BinaryOp, &Broadcast, &[f32], &[f32], &mut [f32]),
    pub binary_inplace: fn(BinaryOp, &Broadcast, &mut [f32], &[f32], bool),
    pub scale_shift: fn(usize, usize, usize, &[f32], &[f32], &[f32], Activation, &mut [f32]),
    pub scale_shift_inplace: fn(usize, usize, usize, &mut [f32], &[f32], &[f32], Activation),
    pub max_pool2d: fn(&Pool2d, &[f32], &mut [f32]),
    pub avg_pool2d: fn(&Pool2d, &[f32], &mut [f32]),
    pub global_avg_pool: fn(usize, usize, usize, &[f32], &mut [f32]),
    pub softmax: fn(usize, usize, usize, &[f32], &mut [f32]),
    pub softmax_inplace: fn(usize, usize, usize, &mut [f32]),
    pub copy_into_channels: fn(usize, usize, usize, &[f32], usize, usize, &mut [f32]),
    pub pad2d: fn(usize, usize, usize, usize, [usize; 4], f32, &[f32], &mut [f32]),
    /// The entries that can split their work among threads ([`crate::par`]), for the ISAs that
    /// have them (x86_64 so far); `None` elsewhere. Call them through [`Kernels::gemm_on`],
    /// [`Kernels::conv2d_on`] and [`Kernels::conv2d_winograd_on`], which fall back to the
    /// serial entries.
    pub par: Option<ParEntries>,
}

/// A table's entries that take a [`Parallel`]: the same contracts as the serial ones.
#[derive(Clone, Copy, Debug)]
#[allow(clippy::type_complexity)] // Each field spells out a kernel's signature on purpose.
pub struct ParEntries {
    pub gemm: fn(&dyn Parallel, usize, usize, usize, &[f32], &[f32], &mut [f32]),
    pub conv2d: ConvParFn,
    pub conv2d_res: ConvResParFn,
    pub conv2d_winograd: ConvParFn,
    pub conv2d_nchwc: NchwcParFn,
    pub conv2d_nchwc_winograd: NchwcWinogradParFn,
}

/// A convolution entry with threads: `conv2d`'s arguments after the [`Parallel`].
pub type ConvParFn =
    fn(&dyn Parallel, &Conv2d, &[f32], &[f32], Option<&[f32]>, Activation, &mut [f32], &mut [f32]);

/// [`Kernels::conv2d_nchwc_winograd`]: the parameters, input, transformed weights, bias,
/// residual, activation, scratch and output.
pub type NchwcWinogradFn =
    fn(&Conv2d, &[f32], &[f32], Option<&[f32]>, Option<&[f32]>, Activation, &mut [f32], &mut [f32]);

/// [`ParEntries::conv2d_nchwc_winograd`]: [`NchwcWinogradFn`]'s arguments after the
/// [`Parallel`].
pub type NchwcWinogradParFn = fn(
    &dyn Parallel,
    &Conv2d,
    &[f32],
    &[f32],
    Option<&[f32]>,
    Option<&[f32]>,
    Activation,
    &mut [f32],
    &mut [f32],
);

/// [`Kernels::conv2d_nchwc`]: the parameters, input, packed weights, bias, residual,
/// activation and output.
pub type NchwcConvFn =
    fn(&Conv2d, &[f32], &[f32], Option<&[f32]>, Option<&[f32]>, Activation, &mut [f32]);

/// [`Kernels::to_blocked`] and [`Kernels::from_blocked`]: `n, c, h, w`, the source and the
/// destination.
pub type ConvertFn = fn(usize, usize, usize, usize, &[f32], &mut [f32]);

/// [`ParEntries::conv2d_nchwc`]: [`NchwcConvFn`]'s arguments after the [`Parallel`].
#[allow(clippy::type_complexity)] // The entry's signature, spelled out.
pub type NchwcParFn = fn(
    &dyn Parallel,
    &Conv2d,
    &[f32],
    &[f32],
    Option<&[f32]>,
    Option<&[f32]>,
    Activation,
    &mut [f32],
);

/// [`Kernels::conv2d_res`]: `conv2d`'s arguments with the residual after the bias.
pub type ConvResFn =
    fn(&Conv2d, &[f32], &[f32], Option<&[f32]>, &[f32], Activation, &mut [f32], &mut [f32]);

/// A residual convolution entry with threads: [`ConvResFn`]'s arguments after the [`Parallel`].
#[allow(clippy::type_complexity)] // The entry's signature, spelled out.
pub type ConvResParFn = fn(
    &dyn Parallel,
    &Conv2d,
    &[f32],
    &[f32],
    Option<&[f32]>,
    &[f32],
    Activation,
    &mut [f32],
    &mut [f32],
);

impl Kernels {
    /// `gemm` on `par`'s threads where this table can split it, else on the calling thread.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_on(
        &self,
        par: &dyn Parallel,
        m: usize,
        n: usize,
        k: usize,
        a: &[f32],
        b: &[f32],
        c: &mut [f32],
    ) {
        match self.par {
            Some(e) if par.threads() > 1 => (e.gemm)(par, m, n, k, a, b, c),
            _ => (self.gemm)(m, n, k, a, b, c),
        }
    }

    /// `conv2d` on `par`'s threads where this table can split it, else on the calling thread.
    /// A depthwise convolution splits by channels on every table
    /// ([`Kernels::depthwise_on`](crate::split)), given a band buffer per task.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn conv2d_on(
        &self,
        par: &dyn Parallel,
        p: &Conv2d,
        input: &[f32],
        weight: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
        scratch: &mut [f32],
        out: &mut [f32],
    ) {
        if par.threads() > 1 && self.depthwise_on(par, p, input, weight, bias, act, scratch, out) {
            return;
        }
        match self.par {
            Some(e) if par.threads() > 1 => {
                (e.conv2d)(par, p, input, weight, bias, act, scratch, out)
            }
            _ => (self.conv2d)(p, input, weight, bias, act, scratch, out),
        }
    }

    /// `conv2d_res` on `par`'s threads where this table can split it, else on the calling
    /// thread.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn conv2d_res_on(
        &self,
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
        match self.par {
            Some(e) if par.threads() > 1 => {
                (e.conv2d_res)(par, p, input, weight, bias, residual, act, scratch, out)
            }
            _ => (self.conv2d_res)(p, input, weight, bias, residual, act, scratch, out),
        }
    }

    /// `conv2d_winograd` on `par`'s threads where this table can split it, else on the
    /// calling thread.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn conv2d_winograd_on(
        &self,
        par: &dyn Parallel,
        p: &Conv2d,
        input: &[f32],
        u: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
        scratch: &mut [f32],
        out: &mut [f32],
    ) {
        match self.par {
            Some(e) if par.threads() > 1 => {
                (e.conv2d_winograd)(par, p, input, u, bias, act, scratch, out)
            }
            _ => (self.conv2d_winograd)(p, input, u, bias, act, scratch, out),
        }
    }

    /// `conv2d_nchwc` on `par`'s threads where this table can split it (by output rows),
    /// else on the calling thread.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn conv2d_nchwc_on(
        &self,
        par: &dyn Parallel,
        p: &Conv2d,
        input: &[f32],
        weight: &[f32],
        bias: Option<&[f32]>,
        residual: Option<&[f32]>,
        act: Activation,
        out: &mut [f32],
    ) {
        match self.par {
            Some(e) if par.threads() > 1 => {
                (e.conv2d_nchwc)(par, p, input, weight, bias, residual, act, out)
            }
            _ => (self.conv2d_nchwc)(p, input, weight, bias, residual, act, out),
        }
    }

    /// `conv2d_nchwc_winograd` on `par`'s threads where this table can split it, else on the
    /// calling thread.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn conv2d_nchwc_winograd_on(
        &self,
        par: &dyn Parallel,
        p: &Conv2d,
        input: &[f32],
        u: &[f32],
        bias: Option<&[f32]>,
        residual: Option<&[f32]>,
        act: Activation,
        scratch: &mut [f32],
        out: &mut [f32],
    ) {
        match self.par {
            Some(e) if par.threads() > 1 => {
                (e.conv2d_nchwc_winograd)(par, p, input, u, bias, residual, act, scratch, out)
            }
            _ => (self.conv2d_nchwc_winograd)(p, input, u, bias, residual, act, scratch, out),
        }
    }
}

/// The portable reference kernels.
pub const PORTABLE: Kernels = {
    use crate::arch::portable as p;
    Kernels {
        isa: Isa::Portable,
        weights: WeightLayout::Rows,
        gemm: p::gemm,
        conv2d: p::conv2d,
        conv2d_res: p::conv2d_res,
        conv2d_winograd: p::winograd::conv2d,
        conv2d_nchwc: crate::nchwc::conv2d,
        conv2d_nchwc_winograd: crate::nchwc::winograd::conv2d,
        to_blocked: crate::nchwc::to_blocked,
        from_blocked: crate::nchwc::from_blocked,
        blocked: false,
        few_tiles_winograd: true,
        dense: p::dense,
        unary: p::unary,
        unary_inplace: p::unary_inplace,
        binary: p::binary,
        binary_inplace: p::binary_inplace,
        scale_shift: p::scale_shift,
        scale_shift_inplace: p::scale_shift_inplace,
        max_pool2d: p::max_pool2d,
        avg_pool2d: p::avg_pool2d,
        global_avg_pool: p::global_avg_pool,
        softmax: p::softmax,
        softmax_inplace: p::softmax_inplace,
        copy_into_channels: p::copy_into_channels,
        pad2d: p::pad2d,
        par: None,
    }
};

/// The table for `isa`, or `None` if this CPU lacks it.
pub fn for_isa(isa: Isa) -> Option<Kernels> {
    isa.is_available().then(|| build(isa))
}

/// The table for `isa`, built weakest to strongest: the portable set, overwritten by each ISA
/// up to `isa` with the entries it implements. Only call it for an available ISA.
const fn build(isa: Isa) -> Kernels {
    #[allow(unused_mut)]
    let mut k = PORTABLE;
    match isa {
        Isa::Portable => {}
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => crate::arch::aarch64::neon::upgrade(&mut k),
        #[cfg(target_arch = "arm")]
        Isa::Neon => crate::arch::arm::neon::upgrade(&mut k),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => crate::arch::x86_64::avx2::upgrade(&mut k),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => {
            crate::arch::x86_64::avx2::upgrade(&mut k);
            crate::arch::x86_64::avx512::upgrade(&mut k);
        }
        // Another architecture's ISA is never available here.
        #[allow(unreachable_patterns)]
        _ => return PORTABLE,
    }
    k.isa = isa;
    k
}

/// The strongest ISA this CPU has.
pub fn detect() -> Isa {
    let mut best = Isa::Portable;
    for isa in Isa::ALL {
        if isa.is_available() {
            best = isa;
        }
    }
    best
}

/// The kernels to use: the strongest ISA available, capped by `KILN_ISA` if it is set
/// (AVX-512 only when `KILN_ISA=avx512` asks for it; see below). Decided on the first call and
/// cached.
#[cfg(feature = "std")]
pub fn best() -> &'static Kernels {
    static CHOSEN: std::sync::OnceLock<Kernels> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| {
        let cap = std::env::var("KILN_ISA")
            .ok()
            .and_then(|name| Isa::from_name(name.trim()));
        let mut isa = Isa::Portable;
        for candidate in Isa::ALL {
            // The strongest ISA the CPU has: AVX-512 where it exists. Measured on an AMD EPYC
            // with AVX-512 (one run, `python3 scripts/bench_e2e.py` then the example under
            // each `KILN_ISA`): ResNet-18 20.1 ms with AVX-512 against 31.9 ms with AVX2, the
            // digits net 2.9 us against 3.0 us; GEMM and every ResNet-50 convolution faster,
            // MobileNet-v2 depthwise equal at the median (0.94-1.48x).
            let wanted = cap.is_none_or(|cap| candidate <= cap);
            if candidate.is_available() && wanted {
                isa = candidate;
            }
        }
        let mut k = build(isa);
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx512 {
            k.few_tiles_winograd = crate::arch::x86_64::few_tiles_winograd_512();
        }
        match std::env::var("KILN_LAYOUT").as_deref().map(str::trim) {
            Ok("blocked") => k.blocked = true,
            Ok("nchw") => k.blocked = false,
            _ => {}
        }
        match std::env::var("KILN_FEW_TILES").as_deref().map(str::trim) {
            Ok("winograd") => k.few_tiles_winograd = true,
            Ok("im2col") => k.few_tiles_winograd = false,
            _ => {}
        }
        k
    })
}

/// The kernels to use: the strongest ISA this build enables (`-C target-feature`), a
/// compile-time constant without `std`.
#[cfg(not(feature = "std"))]
pub fn best() -> &'static Kernels {
    const ISA: Isa = if cfg!(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma",
        target_feature = "avx512f"
    )) {
        Isa::Avx512
    } else if cfg!(all(
        target_arch = "x86_64",
        target_feature = "avx2",
        target_feature = "fma"
    )) {
        Isa::Avx2
    } else if cfg!(all(
        any(target_arch = "aarch64", target_arch = "arm"),
        target_feature = "neon"
    )) {
        Isa::Neon
    } else {
        Isa::Portable
    };
    static CHOSEN: Kernels = build(ISA);
    &CHOSEN
}

fn avx2_available() -> bool {
    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(all(target_arch = "x86_64", not(feature = "std")))]
    {
        cfg!(all(target_feature = "avx2", target_feature = "fma"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn avx512_available() -> bool {
    #[cfg(all(target_arch = "x86_64", feature = "std"))]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(all(target_arch = "x86_64", not(feature = "std")))]
    {
        cfg!(target_feature = "avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn neon_available() -> bool {
    #[cfg(all(target_arch = "aarch64", feature = "std"))]
    {
        std::arch::is_aarch64_feature_detected!("neon")
    }
    #[cfg(all(target_arch = "aarch64", not(feature = "std")))]
    {
        cfg!(target_feature = "neon")
    }
    #[cfg(target_arch = "arm")]
    {
        crate::arch::arm::neon_detected()
    }
    #[cfg(not(any(target_arch = "aarch64", target_arch = "arm")))]
    {
        false
    }
}
