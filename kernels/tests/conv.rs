//! Every ISA's `conv2d` against the portable reference on random convolutions.
//!
//! The strategy draws every branch the kernels distinguish: pointwise (1x1, stride 1, no
//! padding), depthwise (one channel per group, with and without a channel multiplier), and the
//! general im2col-style path with 3x3 and rectangular kernels, strides, dilations, asymmetric
//! padding, groups and batches; output sizes are the standard ones or one larger (ceil-mode
//! shape rules read extra padding). Channel counts and plane sizes are not multiples of the
//! register blocks, so row slivers and ragged column tails are exercised. Each case runs with
//! and without a bias and with a random activation. Results must match `PORTABLE` to a relative
//! 1e-4 (the accumulation order differs).
//!
//! `conv2d_res` (a residual operand added in the epilogue) must give, on every table and to the
//! bit, what the unfused graph computes: the table's own `conv2d` with no activation, then
//! `act(y + r)` per element (`Activation::apply`).

mod common;

use kiln_kernels::{pack, Activation, Conv2d, Kernels, WeightLayout, PORTABLE};
use proptest::prelude::*;

/// Deterministic data in [-1, 1) from a seed.
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed ^ 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

use common::ACTS;

/// A convolution description before its output size is derived.
#[derive(Clone, Debug)]
struct Case {
    batch: usize,
    groups: usize,
    cig: usize,
    cog: usize,
    h: usize,
    w: usize,
    k: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 4],
    /// Ask for one more output row/column than the standard formula.
    bigger: bool,
}

impl Case {
    /// The parameters, or `None` if the kernel does not fit the padded input.
    fn conv(&self) -> Option<Conv2d> {
        // A 1x1 stride-1 unpadded convolution maps the input plane onto itself; a bigger
        // output is not a valid request for it.
        let pointwise = self.k == [1, 1] && self.stride == [1, 1] && self.pad == [0; 4];
        let extra = usize::from(self.bigger && !pointwise);
        let out = |input: usize, k: usize, s: usize, d: usize, pads: usize| {
            let span = d * (k - 1) + 1;
            (input + pads >= span).then(|| (input + pads - span) / s + 1 + extra)
        };
        Some(Conv2d {
            batch: self.batch,
            c_in: self.cig * self.groups,
            h: self.h,
            w: self.w,
            c_out: self.cog * self.groups,
            kh: self.k[0],
            kw: self.k[1],
            stride: self.stride,
            dilation: self.dilation,
            pad: self.pad,
            groups: self.groups,
            out_h: out(
                self.h,
                self.k[0],
                self.stride[0],
                self.dilation[0],
                self.pad[0] + self.pad[2],
            )?,
            out_w: out(
                self.w,
                self.k[1],
                self.stride[1],
                self.dilation[1],
                self.pad[1] + self.pad[3],
            )?,
        })
    }
}

/// Pointwise, depthwise and general convolutions in roughly equal measure.
fn case() -> impl Strategy<Value = Case> {
    let general = (
        1..=2usize,
        1..=3usize,
        1..=9usize,
        1..=20usize,
        1..=12usize,
        1..=12usize,
        prop_oneof![
            Just([3, 3]),
            Just([1, 1]),
            (1..=5usize, 1..=5usize).prop_map(|(a, b)| [a, b])
        ],
        prop_oneof![
            Just([1, 1]),
            Just([2, 2]),
            (1..=3usize, 1..=3usize).prop_map(|(a, b)| [a, b])
        ],
        prop_oneof![3 => Just([1, 1]), 1 => (1..=2usize, 1..=3usize).prop_map(|(a, b)| [a, b])],
        prop_oneof![
            Just([1; 4]),
            Just([0; 4]),
            [0..=3usize, 0..=3usize, 0..=3usize, 0..=3usize]
        ],
        prop::bool::weighted(0.2),
    )
        .prop_map(
            |(batch, groups, cig, cog, h, w, k, stride, dilation, pad, bigger)| Case {
                batch,
                groups,
                cig,
                cog,
                h,
                w,
                k,
                stride,
                dilation,
                pad,
                bigger,
            },
        );
    let pointwise = (
        1..=2usize,
        1..=2usize,
        1..=20usize,
        1..=20usize,
        1..=15usize,
        1..=15usize,
    )
        .prop_map(|(batch, groups, cig, cog, h, w)| Case {
            batch,
            groups,
            cig,
            cog,
            h,
            w,
            k: [1, 1],
            stride: [1, 1],
            dilation: [1, 1],
            pad: [0; 4],
            bigger: false,
        });
    let depthwise = (
        1..=2usize,
        1..=6usize,
        1..=2usize,
        3..=10usize,
        3..=10usize,
        prop_oneof![Just(3), Just(5)],
        1..=2usize,
        0..=2usize,
    )
        .prop_map(|(batch, groups, cog, h, w, k, s, pad)| Case {
            batch,
            groups,
            cig: 1,
            cog,
            h,
            w,
            k: [k, k],
            stride: [s, s],
            dilation: [1, 1],
            pad: [pad; 4],
            bigger: false,
        });
    prop_oneof![2 => general, 1 => pointwise, 1 => depthwise]
}

/// The weights in the layout the table `kt` reads them in, as a model prepares them.
fn prepared(kt: &Kernels, p: &Conv2d, weight: &[f32]) -> Vec<f32> {
    let mut packed = vec![f32::NAN; weight.len()];
    pack::pack_conv2d(kt.weights, p, weight, &mut packed);
    packed
}

fn check(p: &Conv2d, with_bias: bool, act: Activation, seed: u64) -> Result<(), TestCaseError> {
    let input = data(p.batch * p.c_in * p.h * p.w, seed);
    let weight = data(p.c_out * (p.c_in / p.groups) * p.kh * p.kw, seed ^ 1);
    let bias = data(p.c_out, seed ^ 2);
    let bias = with_bias.then_some(&bias[..]);
    let out_len = p.batch * p.c_out * p.out_h * p.out_w;
    let mut scratch = vec![f32::NAN; p.scratch_len()];
    // One element past the output must survive.
    let mut want = vec![7.0f32; out_len + 1];
    (PORTABLE.conv2d)(p, &input, &weight, bias, act, &mut scratch, &mut want);
    for kt in common::isas("conv2d") {
        // Stale scratch must not leak into the result: start it as NaN.
        let mut scratch = vec![f32::NAN; p.scratch_len()];
        let mut got = vec![7.0f32; out_len + 1];
        let weight = prepared(&kt, p, &weight);
        (kt.conv2d)(p, &input, &weight, bias, act, &mut scratch, &mut got);
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let tol = 1e-4 * w.abs().max(1.0);
            prop_assert!(
                (g - w).abs() <= tol,
                "{:?} {:?} bias {} {:?}: [{}] got {} want {}",
                kt.isa,
                p,
                with_bias,
                act,
                i,
                g,
                w
            );
        }
    }
    Ok(())
}

/// `conv2d_res` on every table (the reference included) against the same table's `conv2d`
/// followed by the residual `add` and the activation, to the bit.
fn check_res(p: &Conv2d, with_bias: bool, act: Activation, seed: u64) -> Result<(), TestCaseError> {
    let input = data(p.batch * p.c_in * p.h * p.w, seed);
    let weight = data(p.c_out * (p.c_in / p.groups) * p.kh * p.kw, seed ^ 1);
    let bias = data(p.c_out, seed ^ 2);
    let bias = with_bias.then_some(&bias[..]);
    let out_len = p.batch * p.c_out * p.out_h * p.out_w;
    let res = data(out_len, seed ^ 3);
    let mut tables = vec![PORTABLE];
    tables.extend(common::isas("conv2d_res"));
    for kt in tables {
        let weight = prepared(&kt, p, &weight);
        let mut scratch = vec![f32::NAN; p.scratch_len()];
        let mut want = vec![7.0f32; out_len + 1];
        (kt.conv2d)(
            p,
            &input,
            &weight,
            bias,
            Activation::None,
            &mut scratch,
            &mut want,
        );
        for (y, &r) in want.iter_mut().zip(&res) {
            *y = act.apply(*y + r);
        }
        let mut scratch = vec![f32::NAN; p.scratch_len()];
        let mut got = vec![7.0f32; out_len + 1];
        (kt.conv2d_res)(p, &input, &weight, bias, &res, act, &mut scratch, &mut got);
        let differ = got
            .iter()
            .zip(&want)
            .position(|(g, w)| g.to_bits() != w.to_bits());
        prop_assert!(
            differ.is_none(),
            "{:?} {:?} bias {} {:?}: element {:?} of conv2d_res differs from conv2d + add",
            kt.isa,
            p,
            with_bias,
            act,
            differ
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    #[test]
    fn conv2d_res_is_conv2d_then_add(
        case in case(),
        with_bias in any::<bool>(),
        act in 0..ACTS.len(),
        seed in any::<u64>(),
    ) {
        let Some(p) = case.conv() else { return Ok(()) };
        check_res(&p, with_bias, ACTS[act], seed)?;
    }

    #[test]
    fn conv2d_matches_portable(
        case in case(),
        with_bias in any::<bool>(),
        act in 0..ACTS.len(),
        seed in any::<u64>(),
    ) {
        let Some(p) = case.conv() else { return Ok(()) };
        check(&p, with_bias, ACTS[act], seed)?;
    }
}

/// One image, `c_in x hw x hw` into `c_out` channels under a `k x k` window with stride `s`
/// and padding `pad` on every side.
fn conv(c_in: usize, hw: usize, c_out: usize, k: usize, s: usize, pad: usize) -> Conv2d {
    Conv2d {
        batch: 1,
        c_in,
        h: hw,
        w: hw,
        c_out,
        kh: k,
        kw: k,
        stride: [s, s],
        dilation: [1, 1],
        pad: [pad; 4],
        groups: 1,
        out_h: (hw + 2 * pad - k) / s + 1,
        out_w: (hw + 2 * pad - k) / s + 1,
    }
}

/// Shapes past the GEMM's cache blocks (several depth blocks and column panels, 7x7 planes
/// with a ragged tail), which random cases reach only rarely.
#[test]
fn conv2d_large_shapes_match_portable() {
    for p in [
        conv(64, 7, 20, 3, 1, 1),
        conv(40, 15, 13, 3, 2, 1),
        conv(300, 14, 8, 1, 1, 0),
        conv(3, 23, 16, 7, 2, 3),
        // Output rows long enough for whole-vector stride-2 gathers (8 and 16 lanes).
        conv(6, 41, 10, 3, 2, 1),
        conv(9, 39, 14, 1, 2, 0),
        // Stride 2 through the input's phases (x86: `avx2::im2col::conv2d_gemm`): three
        // depth blocks of taps over four phase planes of 14x14, and a 1x1 projection that
        // reads its one phase in place (c_out <= c_in, two depth blocks).
        conv(128, 28, 40, 3, 2, 1),
        conv(640, 28, 24, 1, 2, 0),
        // A ResNet-50 bottleneck's last 1x1 on a small map: two depth blocks, a residual.
        conv(512, 7, 40, 1, 1, 0),
        // 1x1 projections (c_out <= c_in) read the input in place on AVX-512: rows 529
        // floats apart (not a multiple of a cache line), five column panels the last of which
        // is a half-width tile and one dot-product column (529 = 4 x 128 + 16 + 1), slivers
        // with a balanced row tail (30 = 12 + 9 + 9); and one deeper than a depth block.
        conv(200, 23, 30, 1, 1, 0),
        conv(700, 5, 21, 1, 1, 0),
        // A short 1x1 expansion (c_in <= 128 < c_out, `B` packed): panels of 512 columns,
        // 27 x 27 = 729 = 512 + 217 (six full tiles, a half-width one, 9 dot products).
        conv(24, 27, 150, 1, 1, 0),
        // Few output channels, stride 1 (AVX-512: the GEMM on the padded input,
        // `avx2::flat`): DenseNet-121's 128 -> 32 on 14x14 and 7x7 maps (three depth
        // blocks), and 64 channels under a 5x5 window.
        conv(128, 14, 32, 3, 1, 1),
        conv(128, 7, 32, 3, 1, 1),
        conv(30, 11, 64, 5, 1, 2),
    ] {
        check(&p, true, Activation::Relu, 5).unwrap();
        check_res(&p, true, Activation::Relu, 6).unwrap();
    }
}

/// Every activation, with and without a bias, on products of several depth blocks (the x86
/// tile's last block adds C's earlier blocks before its epilogue, which for AVX2's tile is one
/// branch-free copy per accumulate / bias / residual case, `kern::store_clamped`) and of one
/// short block; with a residual, to the bit what `conv2d` and the `add` give.
#[test]
fn every_epilogue_on_deep_and_short_products_matches_portable() {
    // Two depth blocks of a 1x1 and three of a strided 3x3 (k = 1152); a 24-deep expansion;
    // a MobileNet-v2 projection (144 -> 24; AVX-512 reads its input in place, AVX2 packs it).
    for p in [
        conv(500, 9, 40, 1, 1, 0),
        conv(128, 15, 20, 3, 2, 1),
        conv(24, 13, 70, 1, 1, 0),
        conv(144, 19, 24, 1, 1, 0),
    ] {
        for (seed, act) in ACTS.into_iter().enumerate() {
            for with_bias in [false, true] {
                check(&p, with_bias, act, seed as u64).unwrap();
                check_res(&p, with_bias, act, seed as u64 + 100).unwrap();
            }
        }
    }
}

/// Stems (a 3x3 stride-2 window over 1-4 input channels or a 7x7 one over 1-3, at least 16
/// output columns), which AVX-512 runs through a direct kernel (two: a 7x7 window into a
/// multiple of 64 channels goes to `simd/stem_lanes.rs`): output planes not a multiple of 16
/// columns (the last chunk overlaps), channel counts not a multiple of its blocks, asymmetric and larger padding,
/// one output row and column more than the image gives (ceil mode), two images; every
/// activation, with and without a bias and a residual. Random cases rarely reach 16 columns.
#[test]
fn stem_shapes_match_portable() {
    // `(batch, c_in, h, w, c_out, window, pad [top, left, bottom, right], extra output
    // rows/columns)`.
    type Shape = (usize, usize, usize, usize, usize, usize, [usize; 4], usize);
    let shapes: [Shape; 17] = [
        (1, 3, 41, 41, 10, 3, [1; 4], 0),
        // Blocks of 64, 48 and 32 channels, planes wider than 128 columns; the 7x7 ones into
        // 64 channels run with the channels along the lanes (`stem_lanes`: its segments of at
        // most 128 columns, its last group of 16 columns overlapping, two images, ceil mode).
        (1, 4, 33, 37, 64, 3, [1; 4], 0),
        (1, 2, 9, 300, 32, 3, [1; 4], 0),
        (2, 3, 30, 41, 48, 7, [3, 2, 1, 0], 1),
        (1, 3, 14, 300, 64, 7, [3; 4], 0),
        (2, 2, 30, 41, 64, 7, [3, 2, 1, 0], 1),
        (1, 3, 48, 64, 32, 3, [1; 4], 0),
        (1, 1, 33, 33, 8, 3, [0, 0, 1, 1], 0),
        (1, 4, 35, 70, 24, 3, [1; 4], 0),
        (2, 2, 20, 50, 17, 3, [2, 2, 0, 0], 0),
        (1, 3, 21, 36, 12, 3, [1, 0, 1, 0], 1),
        (1, 3, 96, 96, 24, 3, [1; 4], 0),
        // 7x7: SqueezeNet 1.0's 3 -> 96 (no padding) and ResNet's 3 -> 64 (padding 3).
        (1, 3, 47, 47, 96, 7, [0; 4], 0),
        (1, 3, 40, 70, 64, 7, [3; 4], 0),
        (1, 1, 39, 45, 8, 7, [1, 2, 0, 3], 0),
        (2, 2, 38, 50, 20, 7, [3, 3, 3, 3], 1),
        (1, 3, 45, 37, 90, 7, [2, 5, 2, 1], 0),
    ];
    for (i, &(batch, c_in, h, w, c_out, k, pad, extra)) in shapes.iter().enumerate() {
        let p = Conv2d {
            batch,
            c_in,
            h,
            w,
            c_out,
            kh: k,
            kw: k,
            stride: [2, 2],
            dilation: [1, 1],
            pad,
            groups: 1,
            out_h: (h + pad[0] + pad[2] - k) / 2 + 1 + extra,
            out_w: (w + pad[1] + pad[3] - k) / 2 + 1 + extra,
        };
        assert!(p.out_w >= 16, "{p:?} is not a stem shape");
        for (j, &act) in ACTS.iter().enumerate() {
            let seed = (i * ACTS.len() + j) as u64;
            check(&p, j % 2 == 0, act, seed).unwrap();
            check_res(&p, j % 2 == 1, act, seed).unwrap();
        }
    }
}

/// Weights deeper than one depth block (`pack::KC`), grouped and not, go through the table's
/// layout ([`prepared`]) and match the portable kernel on the weights as given; and a table that
/// reads [`WeightLayout::DepthBlocked`] really does: handed the unpacked weights it is wrong.
#[test]
fn packed_weights_match_unpacked() {
    let conv = |c_in, c_out, k: usize, groups| Conv2d {
        batch: 1,
        c_in,
        h: 6,
        w: 5,
        c_out,
        kh: k,
        kw: k,
        stride: [1, 1],
        dilation: [1, 1],
        pad: [k / 2; 4],
        groups,
        out_h: 6,
        out_w: 5,
    };
    let shapes = [
        conv(1024, 14, 1, 1),
        conv(1000, 26, 1, 2),
        conv(90, 13, 3, 1),
        conv(2 * 47, 4, 3, 2),
    ];
    for p in &shapes {
        let (groups, m, k) = pack::conv2d_weight_matrix(p).unwrap();
        assert!(pack::depth_blocks(k).0 > 1, "{p:?} has one depth block");
        check(p, true, Activation::None, 11).unwrap();
        let weight = data(groups * m * k, 3);
        let mut packed = vec![0.0; weight.len()];
        pack::pack(
            WeightLayout::DepthBlocked,
            groups,
            m,
            k,
            &weight,
            &mut packed,
        );
        assert_ne!(packed, weight);
        for kt in common::isas("conv2d") {
            if kt.weights != WeightLayout::DepthBlocked {
                continue;
            }
            let input = data(p.batch * p.c_in * p.h * p.w, 4);
            let out_len = p.batch * p.c_out * p.out_h * p.out_w;
            let run = |w: &[f32]| {
                let mut out = vec![0.0; out_len];
                (kt.conv2d)(p, &input, w, None, Activation::None, &mut [], &mut out);
                out
            };
            let mut want = vec![0.0; out_len];
            let mut scratch = vec![0.0; p.scratch_len()];
            (PORTABLE.conv2d)(
                p,
                &input,
                &weight,
                None,
                Activation::None,
                &mut scratch,
                &mut want,
            );
            let close = |got: &[f32]| {
                got.iter()
                    .zip(&want)
                    .all(|(g, w)| (g - w).abs() <= 1e-4 * w.abs().max(1.0))
            };
            assert!(close(&run(&packed)), "{:?} {p:?}", kt.isa);
            assert!(
                !close(&run(&weight)),
                "{:?} {p:?} ignores the layout",
                kt.isa
            );
        }
    }
}

/// A geometry whose element counts wrap (`2^62 * 2 * 2 == 0` in `usize`) must be refused by
/// the length checks up front, not pass them with empty slices (the packers' safe indexing
/// would stop this one later, with an index panic: the message tells the two apart).
#[test]
fn wrapped_sizes_are_refused() {
    const HUGE: usize = 1 << (usize::BITS - 2);
    let p = Conv2d {
        batch: 1,
        c_in: 2,
        h: HUGE,
        w: 2,
        c_out: 2,
        kh: 1,
        kw: 1,
        stride: [1, 1],
        dilation: [1, 1],
        pad: [0; 4],
        groups: 1,
        out_h: HUGE,
        out_w: 2,
    };
    for kt in common::isas("wrapped sizes") {
        assert!(
            common::refused_as_short(|| {
                (kt.conv2d)(&p, &[], &[0.0; 4], None, Activation::None, &mut [], &mut [])
            }),
            "{}: conv2d accepted wrapped sizes",
            kt.isa
        );
    }
}
