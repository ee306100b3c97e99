//! Parameter types shared by every implementation of the kernels.
//!
//! These are plain data: the code generator writes them out as constants in the expansion
//! (shapes, strides and paddings are known at compile time), and every ISA folder under
//! `arch/` takes the same types, so switching implementation never changes a call site.

use crate::len::holds;
use crate::math;

/// An element-wise activation, fused into the epilogue of the kernel that produces the values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// The identity.
    None,
    /// `max(x, 0)`; NaN stays NaN.
    Relu,
    /// `min(max(x, min), max)` (ONNX `Clip`, e.g. ReLU6 with `min: 0, max: 6`); NaN stays NaN.
    Clip {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
    },
    /// `x` for `x >= 0`, `alpha * x` otherwise.
    LeakyRelu {
        /// Slope for negative inputs.
        alpha: f32,
    },
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
}

impl Activation {
    /// Applies the activation to one value. This is the single definition of each activation's
    /// semantics; the kernels reach it through one shared epilogue.
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::None => x,
            // Written as comparisons rather than `f32::max` so that NaN propagates (`max`
            // would silently turn NaN into 0), matching ONNX Runtime.
            Activation::Relu => {
                if x < 0.0 {
                    0.0
                } else {
                    x
                }
            }
            Activation::Clip { min, max } => {
                if x < min {
                    min
                } else if x > max {
                    max
                } else {
                    x
                }
            }
            Activation::LeakyRelu { alpha } => {
                if x < 0.0 {
                    alpha * x
                } else {
                    x
                }
            }
            Activation::Sigmoid => math::sigmoidf(x),
            Activation::Tanh => math::tanhf(x),
        }
    }
}

/// A 2-D convolution over NCHW data. All sizes are in elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Conv2d {
    /// Number of images.
    pub batch: usize,
    /// Input channels.
    pub c_in: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub c_out: usize,
    /// Kernel height.
    pub kh: usize,
    /// Kernel width.
    pub kw: usize,
    /// `[sh, sw]`, both at least 1.
    pub stride: [usize; 2],
    /// `[dh, dw]`, both at least 1.
    pub dilation: [usize; 2],
    /// Zero padding `[top, left, bottom, right]`.
    pub pad: [usize; 4],
    /// Channel groups; divides both `c_in` and `c_out`.
    pub groups: usize,
    /// Output height (computed by the compiler; positions past the padded input read zeros).
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
}

impl Conv2d {
    /// Number of `f32` of scratch [`conv2d`](crate::conv2d) needs.
    ///
    /// The compiler duplicates this formula and generated code asserts at compile time that the
    /// planned scratch is at least this, so it must not change without changing both:
    ///
    /// * `0` for a 1x1, stride-1, unpadded convolution (a GEMM directly on the activations);
    /// * for a depthwise convolution (`c_in / groups == 1 && c_out / groups == 1`) with a
    ///   `k`x`k` window, `k` 3 or 5, the same stride `s` of 1 or 2 both ways, no dilation and
    ///   top and left padding below `k`, the zero-padded band buffer of the SIMD kernels:
    ///   - if `s == 2` or `out_w <= 8` (the channels-in-lanes kernel), with
    ///     `row = ((out_w - 1) * s + k) * 16`, `fit = 32768 / row`,
    ///     `bands = min(out_h, if fit < k { 1 } else { (fit - k) / s + 1 })`:
    ///     `((bands - 1) * s + k) * row + 16`;
    ///   - otherwise (the planar kernel)
    ///     `((min(out_h, 16) - 1) * s + k) * s * (max(out_w, 16) + k + 16)`;
    /// * `0` for any other depthwise convolution (direct loops);
    /// * otherwise `(c_in / groups) * kh * kw * out_h * out_w`, the im2col matrix of one group
    ///   of one image.
    pub const fn scratch_len(&self) -> usize {
        if self.is_pointwise() {
            0
        } else if self.is_depthwise() {
            match (lanes_band(self), depthwise_band(self)) {
                (Some(b), _) => b.len,
                (None, Some(b)) => b.rows * b.phase_len * self.stride[0],
                (None, None) => 0,
            }
        } else {
            (self.c_in / self.groups) * self.kh * self.kw * self.out_h * self.out_w
        }
    }

    /// Debug-checks the geometry every conv2d implementation relies on: nonzero groups that
    /// divide both channel counts, and nonzero strides and dilations.
    pub(crate) fn debug_check(&self) {
        debug_assert!(self.groups > 0, "conv2d: groups is 0");
        debug_assert!(
            self.c_in.is_multiple_of(self.groups) && self.c_out.is_multiple_of(self.groups),
            "conv2d: bad groups"
        );
        debug_assert!(
            self.stride[0] > 0 && self.stride[1] > 0,
            "conv2d: zero stride"
        );
        debug_assert!(
            self.dilation[0] > 0 && self.dilation[1] > 0,
            "conv2d: zero dilation"
        );
    }

    /// Checks, in release builds too, what the SIMD kernels rely on before they derive raw
    /// pointers: the geometry [`debug_check`](Self::debug_check) describes, and slices as long
    /// as the shapes say, computed without wrapping (see [`crate::len`]).
    ///
    /// Panics otherwise.
    pub(crate) fn check_operands(
        &self,
        input: &[f32],
        weight: &[f32],
        bias: Option<&[f32]>,
        out: &[f32],
    ) {
        assert!(
            self.groups > 0
                && self.c_in.is_multiple_of(self.groups)
                && self.c_out.is_multiple_of(self.groups)
                && self.stride[0] > 0
                && self.stride[1] > 0
                && self.dilation[0] > 0
                && self.dilation[1] > 0,
            "conv2d: bad parameters {self:?}"
        );
        assert!(
            holds(input.len(), &[self.batch, self.c_in, self.h, self.w])
                && holds(
                    weight.len(),
                    &[self.c_out, self.c_in / self.groups, self.kh, self.kw]
                )
                && bias.is_none_or(|b| b.len() >= self.c_out)
                && holds(out.len(), &[self.batch, self.c_out, self.out_h, self.out_w]),
            "conv2d: short slice for {self:?}"
        );
    }

    /// Checks, in release builds too, that a residual operand ([`conv2d_res`](crate::conv2d_res))
    /// is as long as the output. Panics otherwise.
    pub(crate) fn check_residual(&self, residual: &[f32]) {
        assert!(
            holds(
                residual.len(),
                &[self.batch, self.c_out, self.out_h, self.out_w]
            ),
            "conv2d: short residual for {self:?}"
        );
    }

    /// The first branch of [`scratch_len`](Self::scratch_len): a 1x1 kernel that reads the
    /// input exactly as laid out, so the input already is the GEMM's right-hand matrix.
    pub(crate) const fn is_pointwise(&self) -> bool {
        self.kh == 1
            && self.kw == 1
            && self.stride[0] == 1
            && self.stride[1] == 1
            && self.pad[0] == 0
            && self.pad[1] == 0
            && self.pad[2] == 0
            && self.pad[3] == 0
    }

    /// The second branch: one input and one output channel per group.
    pub(crate) const fn is_depthwise(&self) -> bool {
        self.c_in / self.groups == 1 && self.c_out / self.groups == 1
    }

    /// Whether [`conv2d_winograd`](crate::winograd::conv2d) can run this convolution: a 3x3
    /// window, stride 1, no dilation, one group (any padding).
    pub const fn is_winograd_shape(&self) -> bool {
        self.kh == 3
            && self.kw == 3
            && self.stride[0] == 1
            && self.stride[1] == 1
            && self.dilation[0] == 1
            && self.dilation[1] == 1
            && self.groups == 1
    }

    /// How the Winograd kernel blocks the output tiles of one image; see
    /// [`winograd_scratch_len`](Self::winograd_scratch_len).
    pub(crate) const fn winograd_blocks(&self) -> WinogradBlocks {
        let tiles_x = self.out_w.div_ceil(WINOGRAD_TILE);
        let tiles_y = self.out_h.div_ceil(WINOGRAD_TILE);
        let rows = if tiles_x == 0 {
            0
        } else {
            let want = WINOGRAD_BLOCK_TILES.div_ceil(tiles_x);
            if want < tiles_y {
                want
            } else {
                tiles_y
            }
        };
        WinogradBlocks {
            tiles_x,
            tiles_y,
            rows,
        }
    }

    /// Number of `f32` of scratch [`winograd::conv2d`](crate::winograd::conv2d) needs.
    ///
    /// The compiler duplicates this formula (`kiln_dsl::contract::winograd_scratch`, checked by
    /// a generated `const` assert and `tests/tests/scratch.rs`): with `tx = ceil(out_w / 4)`,
    /// `ty = ceil(out_h / 4)` and a block of `rows = min(ty, ceil(96 / tx))` tile rows,
    /// `36 * (c_in + c_out) * rows * tx` (the transformed input and the 36 products of one
    /// block of tiles).
    pub const fn winograd_scratch_len(&self) -> usize {
        let b = self.winograd_blocks();
        WINOGRAD_POINTS * (self.c_in + self.c_out) * b.rows * b.tiles_x
    }
}

/// Output tile edge of Winograd F(4x4, 3x3).
pub(crate) const WINOGRAD_TILE: usize = 4;

/// Points of the 6x6 Winograd domain: one GEMM each.
pub(crate) const WINOGRAD_POINTS: usize = 36;

/// Output tiles the Winograd kernel transforms per block (rounded up to whole tile rows): the
/// `n` of each of the block's 36 GEMMs. Big enough that the GEMM's packed panels are reused
/// (ResNet-50's 56x56 layers: 7 rows of 14 tiles), small enough that a block of 64 channels
/// stays about 1 MB.
pub(crate) const WINOGRAD_BLOCK_TILES: usize = 96;

/// The tiling of one image for the Winograd kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct WinogradBlocks {
    /// Tiles per row and per column of the output.
    pub(crate) tiles_x: usize,
    pub(crate) tiles_y: usize,
    /// Tile rows per block.
    pub(crate) rows: usize,
}

/// The widest vector, in `f32` lanes, of any SIMD depthwise kernel; the band buffer is sized
/// for it, so that [`Conv2d::scratch_len`] does not depend on the ISA.
pub(crate) const DEPTHWISE_MAX_LANES: usize = 16;

/// The band buffer of the SIMD depthwise kernels (`arch/x86_64/simd/depthwise.rs`): `rows`
/// buffer rows, each `stride` phase rows of `phase_len` elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DepthwiseBand {
    pub(crate) rows: usize,
    pub(crate) phase_len: usize,
}

/// The band buffer for `p`, or `None` if `p` is not a depthwise convolution the SIMD kernels
/// specialise (or its size overflows).
///
/// A band is at most 16 output rows, so it reads `(min(out_h, 16) - 1) * s + k` padded input
/// rows. A phase row holds `max(out_w, L) + (k - 1) / s` elements for the taps of the
/// vector-wide chunks (`L <= 16` lanes), and the row copy's whole-vector stores reach at most
/// `max(out_w, L) + k + L` (stride 1: `pad_left + copied columns + L` with the copied columns
/// ending at the last column a tap reads; stride 2: half of that plus `L + 1`), so
/// `max(out_w, 16) + k + 16` covers both.
pub(crate) const fn depthwise_band(p: &Conv2d) -> Option<DepthwiseBand> {
    let k = p.kh;
    let s = p.stride[0];
    let specialised = p.is_depthwise()
        && p.kw == k
        && (k == 3 || k == 5)
        && p.stride[1] == s
        && (s == 1 || s == 2)
        && p.dilation[0] == 1
        && p.dilation[1] == 1
        && p.pad[0] < k
        && p.pad[1] < k;
    if !specialised {
        return None;
    }
    let oh = if p.out_h < 16 { p.out_h } else { 16 };
    let ow = if p.out_w > DEPTHWISE_MAX_LANES {
        p.out_w
    } else {
        DEPTHWISE_MAX_LANES
    };
    let Some(phase_len) = ow.checked_add(k + DEPTHWISE_MAX_LANES) else {
        return None;
    };
    let rows = if oh == 0 { 0 } else { (oh - 1) * s + k };
    match phase_len.checked_mul(rows * s) {
        Some(_) => Some(DepthwiseBand { rows, phase_len }),
        None => None,
    }
}

/// Floats the channels-in-lanes band buffer may take at [`DEPTHWISE_MAX_LANES`] lanes (128
/// KiB; half that at 8 lanes), unless one band of the smallest height needs more.
pub(crate) const LANES_BAND_FLOATS: usize = 32 * 1024;

/// The band buffer of the channels-in-lanes depthwise kernel: `rows` padded input rows of
/// `width` pixels of `DEPTHWISE_MAX_LANES` channels, for bands of `out_rows` output rows,
/// plus one vector of slack so the kernel can align the buffer; `len` floats in all.
#[derive(Clone, Copy, Debug)]
// Only the x86_64 kernel reads the shape; every target needs `len` for the scratch contract.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct LanesBand {
    pub(crate) out_rows: usize,
    pub(crate) rows: usize,
    pub(crate) width: usize,
    pub(crate) len: usize,
}

/// The channels-in-lanes band for `p` (see [`LanesBand`]), or `None` if the planar kernel
/// (or none) runs `p`. The channels-in-lanes kernel takes the convolutions
/// [`depthwise_band`] accepts with stride 2 or at most 8 output columns: there its transposes
/// cost less than the planar kernel's stride-2 deinterleave and per-plane setup (see
/// `arch/x86_64/simd/depthwise_lanes.rs`).
pub(crate) const fn lanes_band(p: &Conv2d) -> Option<LanesBand> {
    if depthwise_band(p).is_none() || p.out_h == 0 || p.out_w == 0 {
        return None;
    }
    if p.stride[0] != 2 && p.out_w > 8 {
        return None;
    }
    let (k, s) = (p.kh, p.stride[0]);
    // Padded columns the taps read: `(ow - 1) * s + k`.
    let Some(width) = (p.out_w - 1).checked_mul(s) else {
        return None;
    };
    let Some(width) = width.checked_add(k) else {
        return None;
    };
    let Some(row) = width.checked_mul(DEPTHWISE_MAX_LANES) else {
        return None;
    };
    // As many output rows as fit the budget, at least one, at most all.
    let fit = LANES_BAND_FLOATS / row;
    let out_rows = if fit < k { 1 } else { (fit - k) / s + 1 };
    let out_rows = if out_rows > p.out_h {
        p.out_h
    } else {
        out_rows
    };
    let rows = (out_rows - 1) * s + k;
    match row.checked_mul(rows) {
        Some(len) => match len.checked_add(DEPTHWISE_MAX_LANES) {
            Some(len) => Some(LanesBand {
                out_rows,
                rows,
                width,
                len,
            }),
            None => None,
        },
        None => None,
    }
}

/// An element-wise binary operation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
}

impl BinaryOp {
    /// Applies the operation; the kernels specialise on the variant outside their loops.
    #[inline(always)]
    pub(crate) fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
        }
    }
}

/// Broadcasting of two operands to a rank-4 output (lower ranks are padded on the left with 1s
/// by the caller).
///
/// The output is contiguous with `shape`. Element `(i0, i1, i2, i3)` of `a` is at
/// `sum(i_d * a_strides[d])`, likewise for `b`; a stride of 0 broadcasts that dimension.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Broadcast {
    /// The output shape.
    pub shape: [usize; 4],
    /// Element strides of the left operand.
    pub a_strides: [usize; 4],
    /// Element strides of the right operand.
    pub b_strides: [usize; 4],
}

/// A 2-D max or average pooling over NCHW data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pool2d {
    /// Number of images.
    pub batch: usize,
    /// Channels (pooling is per channel).
    pub channels: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Window height.
    pub kh: usize,
    /// Window width.
    pub kw: usize,
    /// `[sh, sw]`, both at least 1.
    pub stride: [usize; 2],
    /// Padding `[top, left, bottom, right]`.
    pub pad: [usize; 4],
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// Average pooling only: divide by the window size clipped to the *padded* input instead
    /// of by the number of real input elements. ONNX `AveragePool` defaults to `false`.
    pub count_include_pad: bool,
}

/// A transposed convolution (ONNX `ConvTranspose`) over 1 to 3 spatial dimensions, as a 3-D
/// one: a lower rank has leading sizes of 1 (and strides, dilations of 1, no padding there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose {
    /// Number of images.
    pub batch: usize,
    /// Input channels.
    pub c_in: usize,
    /// Output channels.
    pub c_out: usize,
    /// Channel groups; divides both `c_in` and `c_out`.
    pub groups: usize,
    /// Input `[d, h, w]`.
    pub input: [usize; 3],
    /// Kernel `[kd, kh, kw]`.
    pub k: [usize; 3],
    /// `[sd, sh, sw]`, all at least 1.
    pub stride: [usize; 3],
    /// `[dd, dh, dw]`, all at least 1.
    pub dilation: [usize; 3],
    /// What is cut from the full result: `[d, h, w]` begins, then ends (ONNX `pads`).
    pub pad: [usize; 6],
    /// Output `[d, h, w]`: `(in - 1) * stride + (k - 1) * dilation + 1 - pad_begin - pad_end`
    /// plus ONNX's `output_padding` (positions no input reaches hold the bias).
    pub out: [usize; 3],
}

impl ConvTranspose {
    /// Number of `f32` of scratch [`conv_transpose`](crate::conv_transpose) needs: one group
    /// of one image's input transposed, `d*h*w * c_in/groups`, and its columns,
    /// `d*h*w * (c_out/groups) * kd*kh*kw`.
    pub const fn scratch_len(&self) -> usize {
        let vol = self.input[0] * self.input[1] * self.input[2];
        let taps = self.k[0] * self.k[1] * self.k[2];
        vol * (self.c_in / self.groups) + vol * (self.c_out / self.groups) * taps
    }
}

/// A transpose (ONNX `Transpose`): output axis `i` is input axis `perm[i]`, so the output has
/// dims `shape[perm[i]]`. Rank 0 to 8; `perm` is a permutation of `0..shape.len()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transpose<'a> {
    /// Input dims.
    pub shape: &'a [usize],
    /// The permutation.
    pub perm: &'a [usize],
}

/// A strided slice (ONNX `Slice` after the compiler resolved clamping and negative starts):
/// output element `j` along axis `a` is input element `starts[a] + j * steps[a]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice<'a> {
    /// Input dims.
    pub shape: &'a [usize],
    /// First input index per axis (in range whenever `out[a] > 0`).
    pub starts: &'a [usize],
    /// Step per axis; never 0, negative to walk backwards.
    pub steps: &'a [isize],
    /// Output dims.
    pub out: &'a [usize],
}

/// A broadcast copy (ONNX `Expand`): output element `i` is input element
/// `sum(i[a] * strides[a])`, with stride 0 along broadcast axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expand<'a> {
    /// Output dims.
    pub out: &'a [usize],
    /// Input element strides per output axis (0 where broadcast).
    pub strides: &'a [usize],
}

/// How [`pad_nd`](crate::pad_nd) fills the border (ONNX `Pad` modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    /// The given constant.
    Constant,
    /// Mirror without repeating the edge: `[1, 2, 3]` padded by 2 reads `3 2 | 1 2 3 | 2 1`.
    /// Requires `before[a] < shape[a]` and `after[a] < shape[a]` (the compiler checks).
    Reflect,
    /// Repeat the edge element. Requires `shape[a] > 0` wherever a pad is nonzero.
    Edge,
}

/// N-D padding: the output has dims `before[a] + shape[a] + after[a]` with the input at offset
/// `before`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PadNd<'a> {
    /// Input dims.
    pub shape: &'a [usize],
    /// Elements added before each axis.
    pub before: &'a [usize],
    /// Elements added after each axis.
    pub after: &'a [usize],
    /// The fill rule.
    pub mode: PadMode,
}

/// A gather index outside `[-len, len)`: [`gather`](crate::gather)'s only failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatherError {
    /// Position of the offending index in the flattened indices.
    pub position: usize,
    /// The index.
    pub index: i64,
    /// The length of the gathered axis.
    pub len: usize,
}

impl core::fmt::Display for GatherError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "gather: index {} (at position {}) is out of range for an axis of length {}",
            self.index, self.position, self.len
        )
    }
}

impl core::error::Error for GatherError {}

/// A reduction over one (merged) axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduce {
    /// Sum; 0 over an empty axis.
    Sum,
    /// Sum divided by the length (integers: truncated); NaN (floats) or 0 (ints) when empty.
    Mean,
    /// Maximum, NaN propagating; `-inf` (or the type's minimum) when empty.
    Max,
    /// Minimum, NaN propagating; `+inf` (or the type's maximum) when empty.
    Min,
    /// Product; 1 over an empty axis.
    Prod,
}

/// An element-wise `f32` function (ONNX math ops that are not fused activations).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryMath {
    /// Square root (NaN below 0).
    Sqrt,
    /// `e^x`.
    Exp,
    /// Natural logarithm (`-inf` at 0, NaN below 0).
    Log,
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `1 / x`.
    Reciprocal,
    /// The error function.
    Erf,
    /// `ln(1 + e^x)`, without overflow.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// `x` for `x > 0`, `alpha (e^x - 1)` otherwise.
    Elu {
        /// Scale of the negative part (ONNX default 1).
        alpha: f32,
    },
    /// `gamma x` for `x > 0`, `gamma alpha (e^x - 1)` otherwise; ONNX's defaults are
    /// [`UnaryMath::SELU_ALPHA`] and [`UnaryMath::SELU_GAMMA`].
    Selu {
        /// Scale of the negative part.
        alpha: f32,
        /// Overall scale.
        gamma: f32,
    },
    /// `x Φ(x) = x (1 + erf(x / √2)) / 2` (ONNX `Gelu`, `approximate = "none"`).
    Gelu,
    /// `x (1 + tanh(√(2/π) (x + 0.044715 x³))) / 2` (ONNX `Gelu`, `approximate = "tanh"`).
    GeluTanh,
}

impl UnaryMath {
    /// ONNX `Selu`'s default `alpha`.
    pub const SELU_ALPHA: f32 = 1.673_263_2;
    /// ONNX `Selu`'s default `gamma`.
    pub const SELU_GAMMA: f32 = 1.050_701;
}

/// An element-wise comparison producing a `bool` stored as `u8` 0/1. Any comparison with NaN
/// is false (IEEE), as in ONNX Runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// `a == b`.
    Eq,
    /// `a < b`.
    Less,
    /// `a > b`.
    Greater,
    /// `a <= b`.
    LessEq,
    /// `a >= b`.
    GreaterEq,
}

/// Broadcasting of two operands to a contiguous output of any rank (0 to 8): output element
/// `i` reads `a[sum(i[d] * a_strides[d])]` and `b[sum(i[d] * b_strides[d])]`. The caller pads
/// the operands' shapes on the left and puts 0 where an operand is broadcast.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BinaryNd<'a> {
    /// Output dims.
    pub out: &'a [usize],
    /// Element strides of `a` per output axis.
    pub a_strides: &'a [usize],
    /// Element strides of `b` per output axis.
    pub b_strides: &'a [usize],
}

/// Broadcasting of ONNX `Where`'s three operands (condition, then, else) to a contiguous
/// output; strides as in [`BinaryNd`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WhereNd<'a> {
    /// Output dims.
    pub out: &'a [usize],
    /// Element strides of the condition per output axis.
    pub cond_strides: &'a [usize],
    /// Element strides of the value taken where the condition is nonzero.
    pub a_strides: &'a [usize],
    /// Element strides of the value taken where it is zero.
    pub b_strides: &'a [usize],
}

/// A batched matrix product with numpy `matmul` broadcasting: the output is contiguous
/// `[batch..., m, n]`; for batch index `i`, the `m x k` matrix of `a` starts at
/// `sum(i[d] * a_strides[d])` and the `k x n` matrix of `b` at `sum(i[d] * b_strides[d])`
/// (strides in elements, 0 along broadcast dims). Each matrix is row-major and contiguous.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatMul<'a> {
    /// The output's batch dims (empty for a plain 2-D product).
    pub batch: &'a [usize],
    /// `a`'s batch strides.
    pub a_strides: &'a [usize],
    /// `b`'s batch strides.
    pub b_strides: &'a [usize],
    /// Rows of `a` and of the output.
    pub m: usize,
    /// Columns of `a`, rows of `b`.
    pub k: usize,
    /// Columns of `b` and of the output.
    pub n: usize,
}

/// A 3-D convolution over NCDHW data (ONNX `Conv` on rank-5 tensors). All sizes in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv3d {
    /// Number of images.
    pub batch: usize,
    /// Input channels.
    pub c_in: usize,
    /// Input depth.
    pub d: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Output channels.
    pub c_out: usize,
    /// Kernel `[kd, kh, kw]`.
    pub k: [usize; 3],
    /// `[sd, sh, sw]`, all at least 1.
    pub stride: [usize; 3],
    /// `[dd, dh, dw]`, all at least 1.
    pub dilation: [usize; 3],
    /// Zero padding: `[d, h, w]` begins, then `[d, h, w]` ends.
    pub pad: [usize; 6],
    /// Channel groups; divides both `c_in` and `c_out`.
    pub groups: usize,
    /// Output `[d, h, w]` (positions past the padded input read zeros).
    pub out: [usize; 3],
}

impl Conv3d {
    /// Number of `f32` of scratch [`conv3d`](crate::conv3d) needs: `0` for a 1x1x1, stride-1,
    /// unpadded convolution (a GEMM directly on the input), otherwise the im2col matrix of
    /// one group of one image, `(c_in / groups) * kd * kh * kw * od * oh * ow`.
    pub const fn scratch_len(&self) -> usize {
        if self.is_pointwise() {
            0
        } else {
            (self.c_in / self.groups)
                * self.k[0]
                * self.k[1]
                * self.k[2]
                * self.out[0]
                * self.out[1]
                * self.out[2]
        }
    }

    /// The zero-scratch case of [`scratch_len`](Self::scratch_len).
    pub(crate) const fn is_pointwise(&self) -> bool {
        self.k[0] == 1
            && self.k[1] == 1
            && self.k[2] == 1
            && self.stride[0] == 1
            && self.stride[1] == 1
            && self.stride[2] == 1
            && self.pad[0] == 0
            && self.pad[1] == 0
            && self.pad[2] == 0
            && self.pad[3] == 0
            && self.pad[4] == 0
            && self.pad[5] == 0
    }
}

/// A 3-D max or average pooling over NCDHW data (ONNX `MaxPool` / `AveragePool` on rank-5
/// tensors). Window tap `t` of output `o` along an axis is at padded coordinate
/// `o * stride + t * dilation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool3d {
    /// Number of images.
    pub batch: usize,
    /// Channels (pooling is per channel).
    pub channels: usize,
    /// Input depth.
    pub d: usize,
    /// Input height.
    pub h: usize,
    /// Input width.
    pub w: usize,
    /// Window `[kd, kh, kw]`.
    pub k: [usize; 3],
    /// `[sd, sh, sw]`, all at least 1.
    pub stride: [usize; 3],
    /// `[dd, dh, dw]`, all at least 1.
    pub dilation: [usize; 3],
    /// Padding: `[d, h, w]` begins, then `[d, h, w]` ends.
    pub pad: [usize; 6],
    /// Output `[d, h, w]`.
    pub out: [usize; 3],
    /// Average pooling only: divide by the number of taps inside the *padded* input instead
    /// of by the number of taps on real input elements. ONNX defaults to `false`.
    pub count_include_pad: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activation_hand_values() {
        assert_eq!(Activation::None.apply(-3.5), -3.5);
        assert_eq!(Activation::Relu.apply(-3.5), 0.0);
        assert_eq!(Activation::Relu.apply(2.0), 2.0);
        assert!(Activation::Relu.apply(f32::NAN).is_nan());
        let relu6 = Activation::Clip { min: 0.0, max: 6.0 };
        assert_eq!(relu6.apply(-1.0), 0.0);
        assert_eq!(relu6.apply(3.0), 3.0);
        assert_eq!(relu6.apply(7.0), 6.0);
        assert!(relu6.apply(f32::NAN).is_nan());
        let leaky = Activation::LeakyRelu { alpha: 0.1 };
        assert_eq!(leaky.apply(-2.0), -0.2);
        assert_eq!(leaky.apply(2.0), 2.0);
        assert_eq!(Activation::Sigmoid.apply(0.0), 0.5);
        // sigmoid(ln 3) = 1 / (1 + 1/3) = 0.75.
        assert!((Activation::Sigmoid.apply(3f32.ln()) - 0.75).abs() < 1e-7);
        // tanh(ln 2) = (2 - 1/2) / (2 + 1/2) = 0.6.
        assert!((Activation::Tanh.apply(2f32.ln()) - 0.6).abs() < 1e-7);
    }

    fn conv(
        kh: usize,
        stride: usize,
        pad: usize,
        c_in: usize,
        c_out: usize,
        groups: usize,
    ) -> Conv2d {
        Conv2d {
            batch: 2,
            c_in,
            h: 9,
            w: 7,
            c_out,
            kh,
            kw: kh,
            stride: [stride, stride],
            dilation: [1, 1],
            pad: [pad; 4],
            groups,
            out_h: 5,
            out_w: 4,
        }
    }

    #[test]
    fn scratch_len_follows_the_documented_formula() {
        // 1x1, stride 1, no padding: no scratch, even with groups.
        assert_eq!(conv(1, 1, 0, 8, 16, 1).scratch_len(), 0);
        assert_eq!(conv(1, 1, 0, 8, 16, 4).scratch_len(), 0);
        // Depthwise 3x3 / 5x5 with stride 2 or at most 8 output columns: the channels-in-lanes
        // band, rows * row + 16 with row = ((out_w - 1) * s + k) * 16 and as many rows as
        // fit 32768 floats (all 5 output rows here).
        assert_eq!(conv(3, 2, 1, 8, 8, 8).scratch_len(), 11 * 9 * 16 + 16);
        assert_eq!(conv(5, 1, 4, 8, 8, 8).scratch_len(), 9 * 8 * 16 + 16);
        // A row too wide for more than one output row per band.
        let wide = Conv2d {
            out_w: 300,
            ..conv(3, 2, 1, 8, 8, 8)
        };
        assert_eq!(wide.scratch_len(), 3 * 601 * 16 + 16);
        // Otherwise the planar band buffer, rows * stride * phase_len with
        // rows = (min(out_h, 16) - 1) * s + k and phase_len = max(out_w, 16) + k + 16.
        let tall = Conv2d {
            out_h: 40,
            out_w: 30,
            ..conv(3, 1, 1, 8, 8, 8)
        };
        assert_eq!(tall.scratch_len(), 18 * 49);
        // Other depthwise convolutions: direct loops, no scratch.
        assert_eq!(conv(7, 1, 1, 8, 8, 8).scratch_len(), 0);
        assert_eq!(conv(3, 3, 1, 8, 8, 8).scratch_len(), 0);
        assert_eq!(conv(3, 1, 3, 8, 8, 8).scratch_len(), 0);
        let dilated = Conv2d {
            dilation: [2, 2],
            ..conv(3, 1, 1, 8, 8, 8)
        };
        assert_eq!(dilated.scratch_len(), 0);
        // General: (c_in / groups) * kh * kw * out_h * out_w.
        assert_eq!(conv(3, 1, 1, 8, 16, 1).scratch_len(), 8 * 3 * 3 * 5 * 4);
        assert_eq!(conv(3, 1, 1, 8, 16, 2).scratch_len(), 4 * 3 * 3 * 5 * 4);
        // A 1x1 with stride or padding is not a plain GEMM on the input.
        assert_eq!(conv(1, 2, 0, 8, 16, 1).scratch_len(), 8 * 5 * 4);
        assert_eq!(conv(1, 1, 1, 8, 16, 1).scratch_len(), 8 * 5 * 4);
        // Depthwise with a channel multiplier is not "depthwise" for the formula.
        assert_eq!(conv(3, 1, 1, 8, 16, 8).scratch_len(), 3 * 3 * 5 * 4);
        // Usable in a const context, as generated code does.
        const N: usize = Conv2d {
            batch: 1,
            c_in: 3,
            h: 8,
            w: 8,
            c_out: 4,
            kh: 3,
            kw: 3,
            stride: [1, 1],
            dilation: [1, 1],
            pad: [1, 1, 1, 1],
            groups: 1,
            out_h: 8,
            out_w: 8,
        }
        .scratch_len();
        assert_eq!(N, 3 * 9 * 64);
    }
}
