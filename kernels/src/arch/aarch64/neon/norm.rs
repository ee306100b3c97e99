//! NEON scale/shift (folded batch norm without a preceding layer to fold into): the vector
//! epilogue per channel plane, bit-identical to the portable kernels. Softmax stays the
//! portable kernel until a vector `exp` with the reference's accuracy exists.

use super::simd::{epilogue, epilogue_from};
use crate::Activation;

pub(crate) use crate::arch::portable::{softmax, softmax_inplace};

/// `out[n, c, s] = act(input[n, c, s] * scale[c] + shift[c])`.
#[allow(clippy::too_many_arguments)] // The signature is the contract generated code calls.
pub(crate) fn scale_shift(
    batch: usize,
    channels: usize,
    spatial: usize,
    input: &[f32],
    scale: &[f32],
    shift: &[f32],
    act: Activation,
    out: &mut [f32],
) {
    let total = batch * channels * spatial;
    debug_assert!(input.len() >= total, "scale_shift: input too short");
    debug_assert!(out.len() >= total, "scale_shift: out too short");
    debug_assert!(
        scale.len() >= channels && shift.len() >= channels,
        "scale_shift: params"
    );
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe {
        scale_shift_neon(
            channels,
            spatial,
            &input[..total],
            scale,
            shift,
            act,
            &mut out[..total],
        )
    }
}

/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn scale_shift_neon(
    channels: usize,
    spatial: usize,
    input: &[f32],
    scale: &[f32],
    shift: &[f32],
    act: Activation,
    out: &mut [f32],
) {
    if spatial == 0 {
        return;
    }
    let planes = out
        .chunks_exact_mut(spatial)
        .zip(input.chunks_exact(spatial));
    for (i, (dst, src)) in planes.enumerate() {
        let c = i % channels;
        epilogue_from(src, dst, scale[c], shift[c], act);
    }
}

/// In-place [`scale_shift`].
pub(crate) fn scale_shift_inplace(
    batch: usize,
    channels: usize,
    spatial: usize,
    data: &mut [f32],
    scale: &[f32],
    shift: &[f32],
    act: Activation,
) {
    let total = batch * channels * spatial;
    debug_assert!(data.len() >= total, "scale_shift_inplace: data too short");
    debug_assert!(
        scale.len() >= channels && shift.len() >= channels,
        "scale_shift_inplace: params"
    );
    // SAFETY: only reachable through a table built after detecting NEON (crate::table).
    unsafe { scale_shift_inplace_neon(channels, spatial, &mut data[..total], scale, shift, act) }
}

/// # Safety
///
/// The CPU must support NEON.
#[target_feature(enable = "neon")]
unsafe fn scale_shift_inplace_neon(
    channels: usize,
    spatial: usize,
    data: &mut [f32],
    scale: &[f32],
    shift: &[f32],
    act: Activation,
) {
    if spatial == 0 {
        return;
    }
    for (i, plane) in data.chunks_exact_mut(spatial).enumerate() {
        let c = i % channels;
        epilogue(plane, scale[c], shift[c], act);
    }
}
