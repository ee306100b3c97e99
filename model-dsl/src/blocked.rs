//! The blocked channel layout: which convolutions run in NCHW16c (`kiln_kernels::nchwc`) and
//! which values are stored so.
//!
//! A network whose convolutions gain from the layout is planned twice: once all NCHW, once
//! with [`choose`]'s convolutions blocked. Both plans are compiled, and the generated `run`
//! takes the blocked one where the kernel table says the blocked plans are the faster
//! (`Kernels::blocked`: the AVX-512 and AVX2 tables; `KILN_LAYOUT` overrides it), so the
//! layout, which is fixed at compile time, still follows the ISA, which is chosen at run time.
//! The graph is the same for both plans; this module is a side table over it (per op, per
//! value), not a rewrite.
//!
//! **Which convolutions.** Those the kernel bench measured faster blocked than NCHW on
//! AVX-512 (`resnet50/nchwc`, `blocked_over_nchw`, docs/performance.md): 2-D, one group, no
//! dilation, run on the GEMM (pointwise or im2col), channels in whole blocks of 16 (no padded
//! lanes computed) and at least four output blocks (the kernel's step), a kernel larger than
//! 1x1 and an output of at least 14x14 pixels (1.05-1.6x; 1x1 layers gain too little to pay
//! for their conversions, see [`pays`]); and 3x3 stride-1 layers of whole blocks on maps of
//! at least 27x27, with at most 128 x 128 channels, fewer than four output blocks (then on
//! maps down to 14x14) or run through im2col in NCHW ([`winograd_pays`]; wider Winograd
//! layers stay on the NCHW Winograd) — and of those, the ones whose gain outweighs the
//! conversions at the edges of their region ([`choose`]: a static estimate in multiply-adds,
//! greedy). A blocked 3x3 stride-1 layer on a map of at least 27x27 (14x14 with fewer than
//! four output blocks) runs through the blocked Winograd convolution (`nchwc::winograd`,
//! [`winograd`]), every other one through the direct `conv2d_nchwc`.
//!
//! **Which values.** A value is stored blocked when its producer is a blocked convolution and
//! every reader is one too (as its input or its residual), and it is not an output. Every
//! other operand of a blocked convolution is converted on the way (`nchwc::to_blocked` of an
//! NCHW input or residual into the op's scratch, `nchwc::from_blocked` of the result from
//! it), so regions of blocked convolutions pay for conversions only at their edges.

use kiln_kernels::nchwc;

use crate::contract::ConvAlgo;
use crate::ir::{as_2d, DType, Graph, OpKind, Producer, ValueId};

/// Which convolutions run blocked and which values are stored NCHW16c.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// Per op: the convolution runs on the table's `conv2d_nchwc`.
    pub convs: Vec<bool>,
    /// Per value: stored NCHW16c (`nchwc::blocked_len` floats).
    pub values: Vec<bool>,
}

/// Smallest output map (pixels) on which a convolution is blocked.
const MIN_PIXELS: usize = 14 * 14;

/// The 2-D geometry of conv op `i` as the kernels take it ([`crate::layout::conv2d_geom`]),
/// if it is a static f32 convolution over one map.
fn conv2d(g: &Graph, i: usize) -> Option<kiln_kernels::Conv2d> {
    let op = &g.ops[i];
    let (x, y) = (g.shape(*op.args.first()?), g.shape(op.result()));
    if x.is_dynamic() || y.is_dynamic() || x.dtype != DType::F32 {
        return None;
    }
    crate::layout::conv2d_geom(g, op)
}

/// Smallest output map (pixels) on which a convolution runs through the blocked Winograd:
/// 27x27 has the 7x7 output tiles of 4x4 that 28x28 has (SqueezeNet 1.0's fire modules).
const MIN_WINOGRAD_PIXELS: usize = 27 * 27;

/// Whether conv op `i`, if blocked, runs through the blocked Winograd convolution
/// (`nchwc::winograd`) rather than the direct one: a 3x3 stride-1 layer of whole input and
/// output blocks on a map of at least [`MIN_WINOGRAD_PIXELS`] ([`MIN_NARROW_WINOGRAD_PIXELS`]
/// if [`narrow`]). In a timing loop over the two blocked kernels (one core, Intel Xeon 207,
/// warm and with 16 MB written between runs) the Winograd one took 0.63-0.81 of the direct
/// one's time at 28x28 and 56x56 (64 -> 64, 128 -> 128), 0.38-0.56 with 32 output channels,
/// but 0.78-1.14 at 14x14, where the direct kernel stays (unless the layer is narrow: its
/// alternative there is the NCHW GEMM).
///
/// Any number of whole input blocks: SqueezeNet's 3x3 expansions, 16 to 64 channels in, which
/// lost to the direct kernel before the SIMD transforms (16 -> 64 at 54x54 in 1.71x its
/// time), now beat every other way to run them (kernel bench, warm, AMD EPYC Zen 5 family 26
/// model 2; GFLOP/s counted as the direct convolution's, blocked Winograd / blocked direct /
/// NCHW Winograd / NCHW im2col): 16 -> 64 at 54x54 379 / 228 / 176 / 210, 32 -> 128 at
/// 54x54 485 / 240 / 278 / 222, at 27x27 514 / 253 / 223 / 214, 48 -> 192 at 27x27 521 /
/// 248 / 289 / 222, 64 -> 256 at 27x27 565 / 253 / 334 / 220. End to end SqueezeNet ran in
/// 0.879 of its time (quartiles 0.871-0.888, 21 rounds pinned in turns).
pub fn winograd(g: &Graph, i: usize) -> bool {
    conv2d(g, i).is_some_and(|p| winograd_geom(&p))
}

/// [`winograd`] on the convolution's geometry.
fn winograd_geom(p: &kiln_kernels::Conv2d) -> bool {
    let whole = |c: usize| c > 0 && c.is_multiple_of(nchwc::BLOCK);
    p.is_winograd_shape()
        && whole(p.c_in)
        && whole(p.c_out)
        && p.out_h * p.out_w
            >= if narrow(p) {
                MIN_NARROW_WINOGRAD_PIXELS
            } else {
                MIN_WINOGRAD_PIXELS
            }
}

/// Fewer than four output blocks: a layer whose NCHW Winograd or GEMM wastes most of its
/// micro-tile on the few output channels (DenseNet-121's 128 -> 32).
fn narrow(p: &kiln_kernels::Conv2d) -> bool {
    p.c_out < nchwc::GROUP * nchwc::BLOCK
}

/// Smallest output map (pixels) on which a [`narrow`] convolution runs through the blocked
/// Winograd: DenseNet-121's 24 layers 128 -> 32 at 14x14 too. Kernel bench (AMD EPYC Zen 4,
/// AVX-512, warm): 148 GFLOP/s against the im2col GEMM's 91; in the network, where the
/// transformed filters (0.6 MB a layer, four times the direct ones) come from L3, DenseNet-121
/// ran in 0.976-0.986 of its time with them blocked (pinned A/B in turns, three runs of 11-15
/// rounds). At 7x7 (its last 16 layers; 1.24x in the kernel bench) two runs disagreed (0.99
/// and 1.03 of the 14x14 rule's time): not taken.
const MIN_NARROW_WINOGRAD_PIXELS: usize = 14 * 14;

/// Most input x output channels of a layer the blocked Winograd beats the NCHW one on: its
/// 36 products re-pack each point's `ci x co` filters for every block of tiles, which the
/// NCHW Winograd does not. Timing loop over the two kernels (one core, alternating, medians
/// of 10-40; Intel Xeon 207, with the SIMD transforms): blocked / NCHW 0.58-0.62 for 64 -> 64
/// at 56x56, 0.63-0.69 for 128 -> 128 at 28x28, 0.79-0.81 for VGG's 64 at 224x224 and 128 at
/// 112x112; but 0.90-0.92 for 64 -> 128 and 128 -> 256, 1.0 for 256 -> 256 at 56x56, 1.2-1.8
/// with 512 channels out: too little, or a loss, before the conversions.
const MAX_WINOGRAD_FILTER: usize = 128 * 128;

/// Whether a layer the blocked Winograd takes ([`winograd`]) gains from it on its own: one
/// of at most [`MAX_WINOGRAD_FILTER`] channel pairs (ResNet-50's 64 -> 64 at 56x56 and 128 ->
/// 128 at 28x28), one with fewer than four output blocks, whose NCHW Winograd or GEMM wastes
/// most of its micro-tile on the few output channels (DenseNet-121's 128 -> 32), or one that
/// NCHW runs through im2col (the direct blocked rule's layers). Measured per layer in
/// DenseNet-121 before the SIMD transforms (two `--features profile` servers in turns,
/// `KILN_LAYOUT=nchw` against `=blocked`, conversions included; Intel Xeon 207): 0.74-0.87
/// of the NCHW time at 56x56 (NCHW Winograd), 0.69-0.74 at 28x28 (NCHW GEMM); at 14x14
/// 0.97-1.34, where the NCHW GEMM takes 0.13-0.15 ms and the transformed filters (0.6 MB)
/// arrive cold from L3 (taken since the SIMD transforms, on AMD EPYC Zen 4's measurement:
/// [`MIN_NARROW_WINOGRAD_PIXELS`]).
fn winograd_pays(g: &Graph, i: usize) -> bool {
    let Some(p) = conv2d(g, i).filter(winograd_geom) else {
        return false;
    };
    let small = p.c_in * p.c_out <= MAX_WINOGRAD_FILTER;
    narrow(&p) || small || crate::layout::conv_algo(g, &g.ops[i]) == Some(ConvAlgo::Im2col)
}

/// Whether op `i` gains from running blocked on its own (the rule at the top of the module).
fn pays(g: &Graph, i: usize) -> bool {
    if winograd_pays(g, i) {
        return true;
    }
    let op = &g.ops[i];
    let OpKind::Conv {
        kernel,
        stride,
        dilation,
        groups: 1,
        ..
    } = &op.kind
    else {
        return false;
    };
    if kernel.len() != 2 || dilation.iter().any(|&d| d != 1) || stride.contains(&0) {
        return false;
    }
    let (x, y) = (g.shape(op.args[0]), g.shape(op.result()));
    if x.is_dynamic() || y.is_dynamic() || x.dtype != DType::F32 || x.rank() != 4 {
        return false;
    }
    let algo = crate::layout::conv_algo(g, op);
    if !matches!(algo, Some(ConvAlgo::Pointwise | ConvAlgo::Im2col)) {
        return false;
    }
    let whole = |c: usize| c > 0 && c.is_multiple_of(nchwc::BLOCK);
    let pixels: usize = y.spatial_dims().iter().product();
    let taps: usize = kernel.iter().product();
    // 1x1 convolutions stay NCHW: in the kernel bench the blocked kernel is 1.0-1.14x as
    // fast as the GEMM on 28x28 and larger maps, but in networks, where a 1x1 layer's input
    // or residual comes from a Winograd layer or a concatenation (NCHW) and so is converted,
    // every one measured was slower blocked (ResNet-50's 64 -> 256 expansions at 56x56 1.2x,
    // DenseNet-121's 1.2-1.36x, the strided 256 -> 512 1.19x; per layer, two builds' servers
    // in turns, Intel Xeon 207). They come back with a blocked Winograd and blocked
    // concatenations.
    // Fewer than four output blocks leave the kernel's four-block steps part empty:
    // DenseNet-121's 128 -> 32 3x3 layers ran 1.25-1.36x slower blocked at 28x28 and
    // 1.01-1.22x at 14x14 (per layer, Intel Xeon 207, conversions included).
    let full_group = y.channels() >= nchwc::GROUP * nchwc::BLOCK;
    whole(x.channels()) && whole(y.channels()) && full_group && taps > 1 && pixels >= MIN_PIXELS
}

/// The share of a convolution's time the blocked kernel saves where [`pays`] says it gains
/// (AVX-512, `resnet50/nchwc` in the kernel bench: 3x3 stride 1 1.05-1.3x as fast as NCHW,
/// 3x3 stride 2 1.2-1.6x; the blocked Winograd's layers 1.4-2.2x, [`winograd`]).
fn saved_share(g: &Graph, i: usize, stride: &[usize]) -> f64 {
    if winograd(g, i) || stride.iter().any(|&s| s > 1) {
        0.3
    } else {
        0.15
    }
}

/// What converting one float between the layouts costs, in multiply-adds of a convolution.
/// The table's converters (`Kernels::to_blocked`/`from_blocked`, in-register transposes on
/// x86) take 0.17-0.30 ns a float into the blocked layout and 0.32-0.45 ns out of it on the
/// Intel Xeon (maps of 14x14 to 56x56, in cache), where the AVX-512 convolutions do about 70
/// G multiply-adds a second: 12-32 multiply-adds a float. (The portable converters, 0.45-0.55
/// ns, were charged 48.)
const CONVERSION_FMAS: f64 = 24.0;

/// The blocked convolutions of `g` and its blocked values, or `None` if no convolution gains.
///
/// Every convolution that [`pays`] starts blocked; then, while it helps, the one whose
/// return to NCHW most improves the estimate (multiply-adds saved by the blocked ones minus
/// the conversions the layouts' edges cost) goes back, one at a time.
pub fn choose(g: &Graph) -> Option<Blocked> {
    let mut convs: Vec<bool> = (0..g.ops.len()).map(|i| pays(g, i)).collect();
    let mut best = estimate(g, &convs);
    loop {
        let mut step = None;
        for i in 0..g.ops.len() {
            if !convs[i] {
                continue;
            }
            convs[i] = false;
            let e = estimate(g, &convs);
            convs[i] = true;
            if e > step.map_or(best, |(_, s)| s) {
                step = Some((i, e));
            }
        }
        let Some((i, e)) = step else { break };
        convs[i] = false;
        best = e;
    }
    let values = stored_blocked(g, &convs);
    convs.contains(&true).then_some(Blocked { convs, values })
}

/// Multiply-adds saved by running `convs` blocked, less the conversions they need.
fn estimate(g: &Graph, convs: &[bool]) -> f64 {
    let values = stored_blocked(g, convs);
    let mut total = 0.0;
    for (i, op) in g.ops.iter().enumerate().filter(|&(i, _)| convs[i]) {
        let OpKind::Conv { kernel, stride, .. } = &op.kind else {
            continue;
        };
        let (x, y) = (g.shape(op.args[0]), g.shape(op.result()));
        let pixels: usize = y.spatial_dims().iter().product();
        let taps: usize = kernel.iter().product();
        let fmas = (y.batch() * pixels * y.channels() * x.channels() * taps) as f64;
        let converted: usize = conversions(g, &values, i).iter().sum();
        total += fmas * saved_share(g, i, stride) - converted as f64 * CONVERSION_FMAS;
    }
    total
}

/// Per value: produced by a blocked convolution, read only by blocked convolutions (as their
/// input or residual), and not an output.
fn stored_blocked(g: &Graph, convs: &[bool]) -> Vec<bool> {
    let mut blocked: Vec<bool> = g
        .values
        .iter()
        .map(|v| matches!(v.producer, Producer::Op { op, slot: 0 } if convs[op.index()]))
        .collect();
    for o in &g.outputs {
        blocked[o.value.index()] = false;
    }
    for (i, op) in g.ops.iter().enumerate() {
        let data = op.data_args();
        for (j, a) in op.args.iter().enumerate() {
            // A blocked convolution reads its input and residual (its data arguments) blocked;
            // anything else (another op, or a blocked conv's weights) reads NCHW bytes.
            let as_data = j == 0 || (data.len() == 2 && j == op.args.len() - 1);
            if !(convs[i] && as_data) {
                blocked[a.index()] = false;
            }
        }
    }
    blocked
}

impl Blocked {
    /// Whether value `v` is stored NCHW16c.
    pub fn value(&self, v: ValueId) -> bool {
        self.values[v.index()]
    }

    /// The f32 scratch blocked conv op `i` needs to convert its operands: an NCHW input, an
    /// NCHW residual and an NCHW result each get a blocked copy, in that order.
    pub fn scratch_parts(&self, g: &Graph, i: usize) -> [usize; 3] {
        conversions(g, &self.values, i)
    }

    /// Whether blocked conv op `i` runs through the blocked Winograd convolution.
    pub fn winograd(&self, g: &Graph, i: usize) -> bool {
        self.convs[i] && winograd(g, i)
    }

    /// The f32 scratch blocked conv op `i` needs: its conversions ([`Self::scratch_parts`]),
    /// then, for a Winograd one, the kernel's own (`nchwc::winograd::scratch_len`).
    pub fn scratch_len(&self, g: &Graph, i: usize) -> usize {
        let kernel = match conv2d(g, i) {
            Some(p) if self.winograd(g, i) => nchwc::winograd::scratch_len(&p),
            _ => 0,
        };
        self.scratch_parts(g, i).iter().sum::<usize>() + kernel
    }

    /// f32 elements a value takes in the arena: its blocked length if stored blocked.
    pub fn stored_len(&self, g: &Graph, v: ValueId) -> Option<usize> {
        self.value(v).then(|| blocked_len(g, v))
    }
}

/// [`Blocked::scratch_parts`] with the blocked values `values`.
fn conversions(g: &Graph, values: &[bool], i: usize) -> [usize; 3] {
    let op = &g.ops[i];
    let data = op.data_args();
    let convert = |v: ValueId| {
        if values[v.index()] {
            0
        } else {
            blocked_len(g, v)
        }
    };
    [
        convert(data[0]),
        data.get(1).map_or(0, |&r| convert(r)),
        convert(op.result()),
    ]
}

/// f32 elements of value `v` (a feature map) stored NCHW16c.
pub fn blocked_len(g: &Graph, v: ValueId) -> usize {
    let s = g.shape(v);
    let [h, w] = as_2d(s.spatial_dims(), 1);
    nchwc::blocked_len(s.batch(), s.channels(), h, w)
}
