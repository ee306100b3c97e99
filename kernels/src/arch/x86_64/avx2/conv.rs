//! conv2d for AVX2 + FMA: every non-depthwise convolution is one GEMM per (image, group) on
//! the blocked driver in [`super::blis`], with the bias and activation fused into its epilogue.
//!
//! Algorithm sketch (the same three branches as the portable kernel, chosen by the same
//! conditions):
//!
//! 1. **Pointwise** (1x1, stride 1, no padding): the group's input planes already are the
//!    `[c_in/g, h*w]` right-hand matrix, packed straight from the input.
//! 2. **Depthwise** (one input and one output channel per group): handed to
//!    [`super::depthwise::depthwise_conv2d`], direct SIMD loops.
//! 3. **General** (3x3, strided, padded, dilated, grouped): `weights[c_out/g, k] *
//!    im2col(input)[k, oh*ow]`, where the im2col matrix is never written: the GEMM's packing
//!    step reads the input through the im2col map ([`super::im2col`]) straight into
//!    its stack panel. That is one pass over the data instead of two (write im2col, then pack
//!    it), and it needs no scratch: [`Conv2d::scratch_len`]'s im2col matrix is for the
//!    portable kernel; `scratch` only reaches the depthwise kernel (its band buffer).
//!
//! The weights `[c_out, c_in/g, kh, kw]` are, per group, the `[c_out/g, k]` left-hand matrix,
//! which the model stored in [`WeightLayout::DepthBlocked`](crate::pack::WeightLayout) when it
//! prepared its parameters (the table's `weights`), so its slivers are read in place; the bias
//! is per row of the GEMM. Depthwise weights stay as they are.

use super::gemm::NR;
use super::im2col::conv2d_gemm;
use super::lanes::Avx2;
use crate::par::{Parallel, Serial};
use crate::{Activation, Conv2d};

/// The GEMM branches for AVX2.
///
/// # Safety
///
/// AVX2 and FMA are available.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the threads and the residual.
unsafe fn conv2d_avx2(
    par: &dyn Parallel,
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    res: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    // SAFETY: AVX2 and FMA are available (this function's contract).
    unsafe { conv2d_gemm::<Avx2, NR>(Avx2::new(), par, p, input, weight, bias, res, act, out) }
}

/// Convolution; see [`crate::conv2d`]. `scratch` is only used by the depthwise branch's
/// kernel (the GEMM branches pack from the input directly).
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
    // SAFETY: only reachable through a table built after detecting avx2 and fma
    // (crate::table).
    unsafe { conv2d_avx2(par, p, input, weight, bias, res, act, out) }
}

winograd_entry!("avx2,fma", super::gemm::gemm);
