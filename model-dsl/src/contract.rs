//! The kernels' side of the contract the compiler plans for: how much scratch each kernel
//! asks for. This module imports nothing; [`crate::infer`] counts the scratch against the
//! byte budget and [`crate::layout`] plans it.
//!
//! The formulas duplicate `kiln_kernels::Conv2d::scratch_len`, `Conv3d::scratch_len` and
//! `ConvTranspose::scratch_len`
//! (kiln-dsl does not depend on the kernels crate). The generated code asserts in a `const`
//! that the planned scratch is at least what the kernel asks for, and `tests/tests/scratch.rs`
//! compares each pair of formulas over a grid of geometries, so they cannot drift apart unseen.
//! (A 1-D convolution runs as a 2-D one of height 1, so [`conv_scratch`] covers it.)

/// f32 elements of scratch `conv2d` needs, on the convolution's geometry (`c_in` and `c_out` per
/// group), or `None` if the count overflows `usize`. It multiplies in the kernel's order, so when
/// this fits, the kernel's own `const` evaluation of the formula fits too.
///
/// * a 1x1, stride-1, unpadded convolution: none (a GEMM on the activations);
/// * a depthwise 3x3 or 5x5 with the same stride `s` of 1 or 2 both ways, no dilation and
///   top/left padding below the window: the SIMD kernels' zero-padded band buffer; with
///   stride 2 or `ow <= 8` the channels-in-lanes kernel's, `((bands - 1) * s + k) * row + 16`
///   with `row = ((ow - 1) * s + k) * 16`, `fit = 32768 / row` and
///   `bands = min(oh, if fit < k { 1 } else { (fit - k) / s + 1 })`, else the planar
///   kernel's, `((min(oh, 16) - 1) * s + k) * s * (max(ow, 16) + k + 16)`;
/// * any other depthwise convolution: none (direct loops);
/// * otherwise the im2col matrix of one group of one image, `c_in * kh * kw * oh * ow`.
pub fn conv_scratch(
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 4],
    c_in: usize,
    c_out: usize,
    [oh, ow]: [usize; 2],
) -> Option<usize> {
    let pointwise = kernel == [1, 1] && stride == [1, 1] && pad == [0; 4];
    let depthwise = c_in == 1 && c_out == 1;
    let [k, s] = [kernel[0], stride[0]];
    let banded = depthwise
        && kernel[1] == k
        && (k == 3 || k == 5)
        && stride[1] == s
        && (s == 1 || s == 2)
        && dilation == [1, 1]
        && pad[0] < k
        && pad[1] < k;
    if pointwise {
        Some(0)
    } else if banded && oh > 0 && ow > 0 && (s == 2 || ow <= 8) {
        let row = (ow - 1).checked_mul(s)?.checked_add(k)?.checked_mul(16)?;
        let fit = 32768 / row;
        let bands = oh.min(if fit < k { 1 } else { (fit - k) / s + 1 });
        row.checked_mul((bands - 1) * s + k)?.checked_add(16)
    } else if banded {
        let rows = if oh == 0 { 0 } else { (oh.min(16) - 1) * s + k };
        ow.max(16).checked_add(k + 16)?.checked_mul(rows * s)
    } else if depthwise {
        Some(0)
    } else {
        c_in.checked_mul(kernel[0])?
            .checked_mul(kernel[1])?
            .checked_mul(oh)?
            .checked_mul(ow)
    }
}

/// f32 elements of scratch `conv3d` needs (`c_in` per group), or `None` if the count overflows
/// `usize`: none for a 1x1x1, stride-1, unpadded convolution (a GEMM on the activations),
/// otherwise the im2col matrix of one group of one image, `c_in * kd * kh * kw * od * oh * ow`,
/// multiplied in the kernel's order.
pub fn conv3d_scratch(
    kernel: [usize; 3],
    stride: [usize; 3],
    pad: [usize; 6],
    c_in: usize,
    out: [usize; 3],
) -> Option<usize> {
    if kernel == [1; 3] && stride == [1; 3] && pad == [0; 6] {
        return Some(0);
    }
    c_in.checked_mul(kernel[0])?
        .checked_mul(kernel[1])?
        .checked_mul(kernel[2])?
        .checked_mul(out[0])?
        .checked_mul(out[1])?
        .checked_mul(out[2])
}

/// f32 elements of scratch `conv_transpose` needs (`c_in`, `c_out` per group, `vol` input
/// positions, `taps` kernel positions), or `None` if the count overflows `usize`: the input of
/// one group of one image transposed, `vol * c_in`, and its columns, `vol * c_out * taps`,
/// multiplied in the kernel's order.
pub fn conv_transpose_scratch(vol: usize, c_in: usize, c_out: usize, taps: usize) -> Option<usize> {
    vol.checked_mul(c_in)?
        .checked_add(vol.checked_mul(c_out)?.checked_mul(taps)?)
}
