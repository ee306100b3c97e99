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

/// How a 2-D convolution is computed; chosen per layer by [`conv_algo`] from its constant
/// geometry. (1-D convolutions run as 2-D ones of height 1; 3-D ones always as im2col + GEMM.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvAlgo {
    /// A 1x1, stride-1, unpadded convolution: one GEMM straight on the activations, no im2col.
    Pointwise,
    /// One input and one output channel per group: direct loops (the SIMD band kernels).
    Depthwise,
    /// im2col (implicit in the SIMD kernels, which pack straight from the input) and a GEMM.
    Im2col,
    /// Winograd F(4x4, 3x3): `kiln_kernels::winograd`, with the filters transformed once when
    /// the weights are prepared.
    Winograd,
}

impl ConvAlgo {
    /// How `Model::PLAN` names it.
    pub fn describe(self) -> &'static str {
        match self {
            ConvAlgo::Pointwise => "gemm on the input (1x1, no im2col)",
            ConvAlgo::Depthwise => "depthwise, direct",
            ConvAlgo::Im2col => "im2col + gemm",
            ConvAlgo::Winograd => "winograd F(4x4,3x3)",
        }
    }
}

/// The algorithm for a 2-D convolution (`c_in`, `c_out` in all, not per group).
///
/// **The Winograd rule**, measured with the kernel benchmark (`-- 3x3/`, the 3x3 stride-1 layers
/// of ResNet-50, VGG-19, DenseNet-121 and SqueezeNet, thread CPU time) and end to end
/// (`scripts/ab_e2e.py`) on AMD EPYC Zen 4 and an Intel Xeon: Winograd F(4x4, 3x3) for a 3x3,
/// stride-1, undilated, ungrouped convolution whose output has enough 4x4 tiles for its
/// channels:
///
/// | narrower channel count | tiles needed (map) |
/// |---|---|
/// | 256 or more | 16 (14x14) |
/// | 128 to 255 | 49 (28x28, 27x27) |
/// | 32 to 127, at most 64 out | 196 (56x56) |
/// | 32 to 127, more out | 49 |
/// | below 32 | never |
///
/// Below that the transforms (linear in `c_in + c_out`) are not paid back by the cheaper
/// products (quadratic in the channels), and the 36 GEMMs get too few columns to run at speed:
/// on Zen 4, 7x7 maps ran at half the im2col speed, SqueezeNet's 13x13 layer with 64 input
/// channels at 0.99 of it and its 55x55 one with 16 at 0.82, while ResNet-50's 56x56, 28x28
/// and 14x14 layers ran 1.40-1.66x faster, VGG-19's 1.4-2.5x and SqueezeNet's 32 -> 128 at
/// 27x27 1.12x. Intel's cores with two 512-bit FMA ports do the products twice as fast and the
/// transforms no faster, which moved two crossovers (Intel Xeon, AVX-512): DenseNet-121's
/// 128 -> 32 at 28x28 ran at 0.60 of peak as Winograd and 0.77 as im2col (whose GEMM reads a
/// padded copy of the input in place for at most 64 output channels; on Zen 4 Winograd had won
/// by 4 %), and Inception-v2's 128- to 192-channel layers at 14x14 lost to onnxruntime's
/// direct convolution by 0.15 ms each as Winograd (their transformed filters come from memory
/// every run); with both moved to im2col Inception-v2 ran 3.3 % and DenseNet-121 4.4 % faster
/// end to end. ResNet-50's 256-channel layers at 14x14 stay Winograd (1.03 of peak against
/// 0.80 as im2col in the kernel bench), but where a network reads their transformed filters
/// from memory the CPU decides ([`few_tiles`]).
#[allow(clippy::too_many_arguments)] // The geometry, as `conv_scratch` takes it.
pub fn conv_algo(
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 4],
    groups: usize,
    c_in: usize,
    c_out: usize,
    [oh, ow]: [usize; 2],
) -> ConvAlgo {
    if kernel == [1, 1] && stride == [1, 1] && pad == [0; 4] {
        return ConvAlgo::Pointwise;
    }
    if groups > 0 && c_in / groups == 1 && c_out / groups == 1 {
        return ConvAlgo::Depthwise;
    }
    let shape = kernel == [3, 3] && stride == [1, 1] && dilation == [1, 1] && groups == 1;
    let tiles = oh.div_ceil(4).saturating_mul(ow.div_ceil(4));
    // The narrower the layer, the more tiles the transforms need to be paid back.
    let tiles_needed = match c_in.min(c_out) {
        256.. => 16,
        128.. => 49,
        32.. if c_out <= 64 => 196,
        32.. => 49,
        _ => usize::MAX,
    };
    if shape && tiles >= tiles_needed {
        ConvAlgo::Winograd
    } else {
        ConvAlgo::Im2col
    }
}

/// Tiles a Winograd layer of 256 to 511 channels needs where FMAs are fast for the memory
/// (`Kernels::few_tiles_winograd` unset: AVX-512 on Intel): the 128-channel row's.
const FAST_FMA_WIDE_TILES: usize = 49;

/// Whether a convolution [`conv_algo`] gave `algo` (`c_in`, `c_out` and the output map as it
/// took them) is one whose best algorithm depends on the CPU: a Winograd one of 256 to 511
/// channels (the narrower count) on fewer than [`FAST_FMA_WIDE_TILES`] tiles (ResNet-50's 256
/// -> 256 at 14x14). Its 36 products have 16 to 48 columns, so each transformed filter (`36
/// c_in c_out` floats, 9.4 MB for 256 -> 256, read from memory once per run) serves few
/// multiply-adds. On AMD Zen 4, whose zmm FMAs run in two halves, the products still take
/// longer than those reads, and Winograd ran ResNet-50 3 % faster than im2col; on an Intel
/// Xeon (two 512-bit FMA ports) the reads set the time (the layer took 1.6 ms in the network
/// against 0.95 warm in the kernel bench, about what 9.4 MB at this guest's 15.5 GB/s of
/// single-core bandwidth adds), and im2col + GEMM ran the network 3.3-4.5 % faster. With 512
/// channels the transforms (linear in the channels, the products quadratic) weigh half as
/// much, and Winograd kept the lead: VGG-19's four 512 -> 512 layers at 14x14 through im2col
/// made it 2.3 % slower on that Xeon (`WARM=1 taskset -c 0 python3 scripts/ab_e2e.py <model>
/// <rounds> <old> <new>`, paired medians). Such a layer gets both weight preparations and the
/// scratch of both, and the generated code runs the one `Kernels::few_tiles_winograd` says.
pub fn few_tiles(algo: ConvAlgo, c_in: usize, c_out: usize, [oh, ow]: [usize; 2]) -> bool {
    let tiles = oh.div_ceil(4).saturating_mul(ow.div_ceil(4));
    algo == ConvAlgo::Winograd
        && (256..512).contains(&c_in.min(c_out))
        && tiles < FAST_FMA_WIDE_TILES
}

/// f32 elements of scratch `kiln_kernels::winograd::conv2d` needs, or `None` on overflow: with
/// `tx = ceil(ow / 4)`, `ty = ceil(oh / 4)` and `rows = min(ty, ceil(96 / tx))` tile rows per
/// block, `36 * (c_in + c_out) * rows * tx` (a copy of `Conv2d::winograd_scratch_len`).
pub fn winograd_scratch(c_in: usize, c_out: usize, [oh, ow]: [usize; 2]) -> Option<usize> {
    let (tx, ty) = (ow.div_ceil(4), oh.div_ceil(4));
    let rows = if tx == 0 {
        0
    } else {
        96usize.div_ceil(tx).min(ty)
    };
    36usize
        .checked_mul(c_in.checked_add(c_out)?)?
        .checked_mul(rows)?
        .checked_mul(tx)
}

/// Band buffers planned for a depthwise convolution whose kernel needs one: a copy of
/// `kiln_kernels::split::DEPTHWISE_SCRATCH_SLOTS`, one per task when it runs on several
/// threads. The kernel splits into as many channel runs as its scratch holds buffers, so this
/// is a speed choice, not part of the contract (one buffer would keep it on one thread).
pub const DEPTHWISE_SCRATCH_SLOTS: usize = 4;

/// f32 elements of scratch a 2-D convolution needs with the algorithm `algo` (`c_in` and
/// `c_out` in all): [`winograd_scratch`] (the larger of it and [`conv_scratch`] for a
/// [`few_tiles`] layer, which may run either way), or [`conv_scratch`] (for a depthwise one,
/// [`DEPTHWISE_SCRATCH_SLOTS`] times it).
#[allow(clippy::too_many_arguments)] // The geometry, as `conv_scratch` takes it.
pub fn conv2d_scratch(
    algo: ConvAlgo,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 4],
    groups: usize,
    c_in: usize,
    c_out: usize,
    out: [usize; 2],
) -> Option<usize> {
    let gemm = || {
        conv_scratch(
            kernel,
            stride,
            dilation,
            pad,
            c_in / groups.max(1),
            c_out / groups.max(1),
            out,
        )
    };
    match algo {
        ConvAlgo::Winograd => {
            let len = winograd_scratch(c_in, c_out, out)?;
            if few_tiles(algo, c_in, c_out, out) {
                gemm().map(|g| g.max(len))
            } else {
                Some(len)
            }
        }
        ConvAlgo::Depthwise => gemm()?.checked_mul(DEPTHWISE_SCRATCH_SLOTS),
        _ => gemm(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn algo(k: usize, s: usize, groups: usize, c_in: usize, c_out: usize, hw: usize) -> ConvAlgo {
        let pad = [k / 2; 4];
        conv_algo([k, k], [s, s], [1, 1], pad, groups, c_in, c_out, [hw, hw])
    }

    /// The layers that may run either way: Winograd ones of 256 to 511 channels on 16 to 48
    /// tiles, nothing else.
    #[test]
    fn few_tiles_only_on_wide_winograd_layers_of_small_maps() {
        let few = |c_in: usize, c_out: usize, hw: usize| {
            few_tiles(algo(3, 1, 1, c_in, c_out, hw), c_in, c_out, [hw, hw])
        };
        assert!(few(256, 256, 14)); // 16 tiles: ResNet-50's
        assert!(few(256, 256, 13));
        assert!(few(512, 256, 24)); // 6x6 = 36 tiles
        assert!(!few(512, 256, 27)); // 7x7 = 49 tiles
        assert!(!few(256, 256, 28)); // 49 tiles
        assert!(!few(256, 256, 12)); // 9 tiles: im2col anyway
        assert!(!few(128, 128, 28)); // the 128-channel row needs 49 anyway
        assert!(!few(255, 256, 14)); // im2col anyway
        assert!(!few(512, 512, 14)); // Winograd everywhere: VGG-19's
        assert!(few(511, 1024, 14));
        assert!(!few_tiles(algo(3, 2, 1, 256, 256, 28), 256, 256, [14, 14]));
        // The scratch covers both ways.
        let both = conv2d_scratch(
            ConvAlgo::Winograd,
            [3, 3],
            [1, 1],
            [1, 1],
            [1; 4],
            1,
            256,
            256,
            [14, 14],
        );
        let im2col = conv_scratch([3, 3], [1, 1], [1, 1], [1; 4], 256, 256, [14, 14]);
        let winograd = winograd_scratch(256, 256, [14, 14]);
        assert_eq!(both, im2col.max(winograd));
    }

    /// The rule on the layers it was measured on (see `conv_algo`'s doc) and its edges.
    #[test]
    fn winograd_where_it_was_measured_to_win() {
        use ConvAlgo::*;
        // ResNet-50's 3x3 stride-1 layers: all but the 7x7 one.
        assert_eq!(algo(3, 1, 1, 64, 64, 56), Winograd);
        assert_eq!(algo(3, 1, 1, 128, 128, 28), Winograd);
        assert_eq!(algo(3, 1, 1, 256, 256, 14), Winograd);
        assert_eq!(algo(3, 1, 1, 512, 512, 7), Im2col);
        // Narrow layers (DenseNet's 128 -> 32, SqueezeNet's expand layers) need larger maps,
        // and narrow outputs larger still.
        assert_eq!(algo(3, 1, 1, 128, 32, 56), Winograd); // 14x14 = 196 tiles
        assert_eq!(algo(3, 1, 1, 128, 32, 52), Im2col); // 13x13 = 169 tiles
        assert_eq!(algo(3, 1, 1, 128, 32, 28), Im2col); // 7x7 = 49 tiles
        assert_eq!(algo(3, 1, 1, 32, 128, 27), Winograd);
        assert_eq!(algo(3, 1, 1, 48, 192, 27), Winograd);
        assert_eq!(algo(3, 1, 1, 128, 32, 14), Im2col); // 16 tiles
        assert_eq!(algo(3, 1, 1, 31, 128, 27), Im2col);
        assert_eq!(algo(3, 1, 1, 16, 64, 55), Im2col);
        assert_eq!(algo(3, 1, 1, 16, 16, 224), Im2col);
        assert_eq!(algo(3, 1, 1, 64, 256, 13), Im2col);
        assert_eq!(algo(3, 1, 1, 64, 65, 25), Winograd); // 7x7 = 49 tiles
        assert_eq!(algo(3, 1, 1, 64, 64, 25), Im2col); // 7x7 = 49 tiles, at most 64 out
        assert_eq!(algo(3, 1, 1, 64, 64, 53), Winograd); // 14x14 = 196 tiles, at most 64 out
        assert_eq!(algo(3, 1, 1, 64, 64, 52), Im2col); // 13x13 = 169 tiles
        assert_eq!(algo(3, 1, 1, 64, 65, 24), Im2col); // 6x6 = 36 tiles
                                                       // Wide layers: 16 tiles from 256 channels, 49 from 128 (Inception-v2's 14x14 layers).
        assert_eq!(algo(3, 1, 1, 256, 256, 13), Winograd); // 16 tiles
        assert_eq!(algo(3, 1, 1, 256, 256, 12), Im2col); // 9 tiles
        assert_eq!(algo(3, 1, 1, 128, 192, 14), Im2col); // 16 tiles
        assert_eq!(algo(3, 1, 1, 255, 256, 14), Im2col);
        assert_eq!(algo(3, 1, 1, 128, 128, 25), Winograd); // 49 tiles
                                                           // Never for strides, other windows, groups or dilation.
        assert_eq!(algo(3, 2, 1, 256, 256, 56), Im2col);
        assert_eq!(algo(5, 1, 1, 256, 256, 56), Im2col);
        assert_eq!(algo(3, 1, 2, 256, 256, 56), Im2col);
        let dilated = conv_algo([3, 3], [1, 1], [2, 2], [2; 4], 1, 64, 64, [56, 56]);
        assert_eq!(dilated, Im2col);
        // The other branches, in the kernels' order (pointwise before depthwise).
        assert_eq!(algo(1, 1, 1, 64, 64, 56), Pointwise);
        assert_eq!(algo(1, 1, 64, 64, 64, 56), Pointwise);
        assert_eq!(algo(3, 1, 64, 64, 64, 56), Depthwise);
    }
}
