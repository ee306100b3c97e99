//! NEON kernels for 32-bit arm, in `asm!` (see the parent module for why). [`upgrade`] puts
//! them into a table; `crate::table` only calls it after [`super::neon_detected`] said yes.
//!
//! What is here: the packed GEMM (`gemm.rs`, a 6x8 `vmla.f32` micro-kernel), `conv2d`, which
//! (and `conv2d_res`) is the portable convolution with this GEMM for its pointwise and im2col
//! products (depthwise
//! stays portable, as does the bias + activation pass over the output), and `dense`
//! (`dense.rs`, four weight rows per `asm!` dot-product loop). Everything else in the table is
//! the portable kernel. Correctness is checked under qemu-arm in CI
//! (`.ci/cross armv7-unknown-linux-gnueabihf`); speed is not measured there, since emulated
//! timings say nothing about a real core.

mod dense;
mod gemm;

use crate::table::Kernels;
use crate::{Activation, Conv2d};

/// Overwrites the entries of `k` this ISA implements.
pub(crate) const fn upgrade(k: &mut Kernels) {
    k.gemm = gemm::gemm;
    k.dense = dense::dense;
    k.conv2d = conv2d;
    k.conv2d_res = conv2d_res;
    k.conv2d_winograd = conv2d_winograd;
}

/// The portable [`winograd::conv2d`](crate::winograd::conv2d) with the NEON GEMM underneath.
fn conv2d_winograd(
    p: &Conv2d,
    input: &[f32],
    u: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    use crate::arch::portable::winograd::{conv2d_with, Plain};
    let serial = &crate::par::Serial;
    conv2d_with::<Plain>(gemm::gemm, serial, p, input, u, bias, act, scratch, out);
}

/// The portable [`conv2d`](crate::conv2d) with the NEON GEMM underneath; same contract.
fn conv2d(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    // The portable checks are `debug_assert!`s, whose products wrap in release builds.
    p.check_operands(input, weight, bias, out);
    crate::arch::portable::conv::conv2d_with(
        gemm::gemm,
        p,
        input,
        weight,
        bias,
        None,
        act,
        scratch,
        out,
    );
}

/// The portable [`conv2d_res`](crate::conv2d_res) with the NEON GEMM underneath; same contract.
#[allow(clippy::too_many_arguments)] // conv2d's contract plus the residual.
fn conv2d_res(
    p: &Conv2d,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    residual: &[f32],
    act: Activation,
    scratch: &mut [f32],
    out: &mut [f32],
) {
    p.check_operands(input, weight, bias, out);
    p.check_residual(residual);
    crate::arch::portable::conv::conv2d_with(
        gemm::gemm,
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
