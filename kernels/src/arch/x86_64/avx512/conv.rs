//! conv2d for AVX-512F: the same strategy as AVX2 (see `avx2::conv`), with the 12 x 32
//! micro-kernel. Depthwise convolutions go to this ISA's
//! [`super::depthwise::depthwise_conv2d`]; every other one is a GEMM per (image, group),
//! pointwise ones on the input as it lies and the rest through the implicit im2col packer
//! (`avx2::im2col`), with bias and activation in the GEMM's epilogue. `scratch` is only
//! passed on to the depthwise kernel.

use super::gemm::{Avx512, NR};
use crate::arch::x86_64::avx2::im2col::conv2d_gemm;
use crate::par::{Parallel, Serial};
use crate::{Activation, Conv2d};

/// The GEMM branches for AVX-512.
///
/// # Safety
///
/// AVX-512F, AVX2 and FMA are available.
#[target_feature(enable = "avx512f,avx2,fma")]
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the threads and the residual.
unsafe fn conv2d_avx512(
    par: &dyn Parallel,
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    res: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    // SAFETY: the features are available (this function's contract).
    unsafe { conv2d_gemm::<Avx512, NR>(Avx512::new(), par, p, input, weight, bias, res, act, out) }
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
    // SAFETY: only reachable through a table built after detecting avx512f, avx2 and fma
    // (crate::table).
    unsafe { conv2d_avx512(par, p, input, weight, bias, res, act, out) }
}

winograd_entry!("avx512f,avx2,fma", super::gemm::gemm);
