//! The Winograd F(4x4, 3x3) convolution (the portable `winograd::conv2d` and every ISA's
//! `conv2d_winograd` table entry, on filters through `winograd::transform_filter`) against a
//! naive direct convolution computed here in `f64`, not against another kiln kernel.
//!
//! **The error bound.** Winograd's transforms scale values by up to 8 (output) and 1/24
//! (filter) before the products are summed, so its rounding error grows with the magnitudes
//! summed, not with the result (which may cancel to near zero). And the input transform mixes
//! a whole 6x6 input tile into every one of the tile's 16 outputs, so an output's error grows
//! with the tile's magnitudes, not only its own 3x3 window's: an output whose window lies
//! mostly in the padding (sum of products near zero) still carries rounding from the tile's
//! other rows. Each output is therefore checked against `|got - want| <= BOUND * M + 1e-6`
//! with `M = |bias| + sum over input channels of (sum |w|) * (max |x| over the 9x9 input
//! neighbourhood any 6x6 tile holding the window can cover)`, which does not depend on where
//! the kernel starts its tiles. The im2col GEMM is checked against the tighter per-window `M
//! = sum |w * x|` (the condition of its dot product) with `BOUND / 16` to spare
//! (`im2col_is_within_a_sixteenth_of_the_bound` keeps the bound honest, so it says how much
//! accuracy Winograd costs). Magnitudes are realistic:
//! inputs like post-ReLU activations in [0, 4), He-initialised weights (`std = sqrt(2 / 9
//! c_in)`), biases in [-1, 1).

mod common;

use kiln_kernels::{winograd, Activation, Conv2d, Kernels, PORTABLE};
use proptest::prelude::*;

/// Relative to the tile magnitude `M`; see the module doc. Measured worst case on the real
/// layers below: about 6e-7.
const BOUND: f64 = 1e-5;

/// Reproducible data: `lo + (hi - lo) * uniform`, or approximately normal with `std` when
/// `normal` (the sum of four uniforms).
fn data(len: usize, seed: u32, lo: f64, hi: f64) -> Vec<f32> {
    let mut rng = common::Rng::new(seed);
    (0..len).map(|_| rng.uniform(lo, hi) as f32).collect()
}

fn weights(len: usize, c_in: usize, seed: u32) -> Vec<f32> {
    let std = (2.0 / (9.0 * c_in as f64)).sqrt();
    let mut rng = common::Rng::new(seed);
    (0..len)
        .map(|_| {
            // Irwin-Hall with four terms: mean 2, variance 1/3.
            let s: f64 = (0..4).map(|_| rng.uniform(0.0, 1.0)).sum();
            ((s - 2.0) * 3f64.sqrt() * std) as f32
        })
        .collect()
}

const ACTS: [Activation; 4] = [
    Activation::None,
    Activation::Relu,
    Activation::Clip { min: 0.0, max: 6.0 },
    Activation::Sigmoid,
];

/// The direct convolution in `f64`, before the activation, with the two magnitudes of the
/// module doc per output.
struct Reference {
    y: Vec<f64>,
    /// `sum |w * x|` over the products that form the output.
    window: Vec<f64>,
    /// `|bias| + sum over ci of (sum |w|) * max |x|` over the tile neighbourhood.
    tile: Vec<f64>,
}

fn reference(p: &Conv2d, x: &[f32], w: &[f32], bias: Option<&[f32]>) -> Reference {
    let n_out = p.batch * p.c_out * p.out_h * p.out_w;
    let (mut y, mut mag) = (vec![0f64; n_out], vec![0f64; n_out]);
    let mut tile = vec![0f64; n_out];
    for n in 0..p.batch {
        for co in 0..p.c_out {
            for oy in 0..p.out_h {
                for ox in 0..p.out_w {
                    let mut s = bias.map_or(0.0, |b| f64::from(b[co]));
                    let mut m = s.abs();
                    for ci in 0..p.c_in {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let iy = (oy + ky) as isize - p.pad[0] as isize;
                                let ix = (ox + kx) as isize - p.pad[1] as isize;
                                if iy < 0 || ix < 0 || iy >= p.h as isize || ix >= p.w as isize {
                                    continue;
                                }
                                let xv =
                                    x[((n * p.c_in + ci) * p.h + iy as usize) * p.w + ix as usize];
                                let wv = w[((co * p.c_in + ci) * 3 + ky) * 3 + kx];
                                let prod = f64::from(xv) * f64::from(wv);
                                s += prod;
                                m += prod.abs();
                            }
                        }
                    }
                    let i = ((n * p.c_out + co) * p.out_h + oy) * p.out_w + ox;
                    y[i] = s;
                    mag[i] = m;
                    tile[i] = bias.map_or(0.0, |b| f64::from(b[co]).abs())
                        + (0..p.c_in)
                            .map(|ci| {
                                let wsum: f64 = w[(co * p.c_in + ci) * 9..][..9]
                                    .iter()
                                    .map(|&v| f64::from(v).abs())
                                    .sum();
                                wsum * neighbourhood_max(p, x, n, ci, oy, ox)
                            })
                            .sum::<f64>();
                }
            }
        }
    }
    Reference {
        y,
        window: mag,
        tile,
    }
}

/// `max |x|` of image `n`, channel `ci` over the input rows and columns any 6x6 tile holding
/// the window of output `(oy, ox)` can cover: three either side of the window.
fn neighbourhood_max(p: &Conv2d, x: &[f32], n: usize, ci: usize, oy: usize, ox: usize) -> f64 {
    let rows = (oy as isize - p.pad[0] as isize - 3)..(oy as isize - p.pad[0] as isize + 6);
    let cols = (ox as isize - p.pad[1] as isize - 3)..(ox as isize - p.pad[1] as isize + 6);
    let plane = &x[(n * p.c_in + ci) * p.h * p.w..][..p.h * p.w];
    let mut m = 0f64;
    for iy in rows.filter(|&r| r >= 0 && r < p.h as isize) {
        for ix in cols.clone().filter(|&c| c >= 0 && c < p.w as isize) {
            m = m.max(f64::from(plane[iy as usize * p.w + ix as usize]).abs());
        }
    }
    m
}

fn apply(act: Activation, x: f64) -> f64 {
    match act {
        Activation::None => x,
        Activation::Relu => x.max(0.0),
        Activation::Clip { min, max } => x.clamp(f64::from(min), f64::from(max)),
        Activation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        _ => unreachable!("not drawn"),
    }
}

/// A 3x3 stride-1 convolution with the given padding (output size as ONNX computes it).
fn conv(batch: usize, c_in: usize, c_out: usize, h: usize, w: usize, pad: [usize; 4]) -> Conv2d {
    Conv2d {
        batch,
        c_in,
        h,
        w,
        c_out,
        kh: 3,
        kw: 3,
        stride: [1, 1],
        dilation: [1, 1],
        pad,
        groups: 1,
        out_h: (h + pad[0] + pad[2]).saturating_sub(2),
        out_w: (w + pad[1] + pad[3]).saturating_sub(2),
    }
}

/// A convolution under test: `(input, weight, bias, out)`.
type Conv<'a> = dyn Fn(&[f32], &[f32], Option<&[f32]>, &mut [f32]) + 'a;

/// Which magnitude of the module doc an error is measured against.
#[derive(Clone, Copy)]
enum Scale {
    /// Winograd: the tile neighbourhood's.
    Tile,
    /// A direct dot product: its own window's.
    Window,
}

/// Runs `run` on random data for `p` and checks it against the reference with `bound` times
/// the `scale` magnitude; returns the worst `|error| / magnitude` seen.
#[allow(clippy::too_many_arguments)]
fn check_with(
    p: &Conv2d,
    act: Activation,
    with_bias: bool,
    seed: u32,
    bound: f64,
    scale: Scale,
    what: &str,
    run: &Conv,
) -> Result<f64, TestCaseError> {
    let x = data(p.batch * p.c_in * p.h * p.w, seed, 0.0, 4.0);
    let w = weights(p.c_out * p.c_in * 9, p.c_in, seed ^ 0x55);
    let b = data(p.c_out, seed ^ 0xaa, -1.0, 1.0);
    let bias = with_bias.then_some(&b[..]);
    let r = reference(p, &x, &w, bias);
    let (want, mag) = match scale {
        Scale::Tile => (r.y, r.tile),
        Scale::Window => (r.y, r.window),
    };
    let n_out = want.len();
    // One element past the output must survive.
    let mut got = vec![7.0f32; n_out + 1];
    run(&x, &w, bias, &mut got);
    prop_assert_eq!(
        got[n_out],
        7.0,
        "{}: wrote past the output of {:?}",
        what,
        p
    );
    let mut worst = 0f64;
    for i in 0..n_out {
        let (g, r) = (f64::from(got[i]), apply(act, want[i]));
        // The activations are 1-Lipschitz, so the pre-activation bound carries over.
        let err = (g - r).abs();
        worst = worst.max(err / mag[i].max(1e-30));
        prop_assert!(
            err <= bound * mag[i] + 1e-6,
            "{} {:?} {:?} bias {}: [{}] got {} want {} (magnitude {})",
            what,
            p,
            act,
            with_bias,
            i,
            g,
            r,
            mag[i]
        );
    }
    Ok(worst)
}

/// Every Winograd implementation on `p`; the worst error ratio over them.
fn check(p: &Conv2d, act: Activation, with_bias: bool, seed: u32) -> Result<f64, TestCaseError> {
    let tables: Vec<Kernels> = std::iter::once(PORTABLE)
        .chain(common::isas("conv2d_winograd"))
        .collect();
    let mut worst = 0f64;
    for kt in tables {
        let run = |x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]| {
            let mut u = vec![f32::NAN; 36 * p.c_out * p.c_in];
            winograd::transform_filter(p.c_out, p.c_in, w, &mut u);
            // Stale scratch must not leak into the result: start it as NaN.
            let mut scratch = vec![f32::NAN; p.winograd_scratch_len()];
            (kt.conv2d_winograd)(p, x, &u, bias, act, &mut scratch, out);
        };
        let what = format!("{}", kt.isa);
        worst = worst.max(check_with(
            p,
            act,
            with_bias,
            seed,
            BOUND,
            Scale::Tile,
            &what,
            &run,
        )?);
    }
    Ok(worst)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Random small layers: ragged tiles (sizes not multiples of 4), every padding up to 2 on
    /// each side, one and two images, channel counts off the GEMM's register blocks.
    #[test]
    fn winograd_matches_direct_convolution(
        batch in 1..=2usize,
        c_in in 1..=12usize,
        c_out in 1..=14usize,
        h in 1..=19usize,
        w in 1..=19usize,
        pad in [0..=2usize, 0..=2usize, 0..=2usize, 0..=2usize],
        act in 0..ACTS.len(),
        with_bias in any::<bool>(),
        seed in any::<u32>(),
    ) {
        let p = conv(batch, c_in, c_out, h, w, pad);
        check(&p, ACTS[act], with_bias, seed)?;
    }
}

/// The case CI found when the bound was per window: the last output row's window lies two
/// rows deep in the bottom padding, so its own products sum to almost nothing while its tile
/// holds four real rows.
#[test]
fn outputs_in_the_padding_are_measured_by_their_tile() {
    let p = conv(1, 1, 6, 19, 16, [1, 0, 2, 0]);
    check(&p, Activation::None, false, 2_267_760_392).unwrap();
}

/// Layer shapes of ResNet-50 and VGG-19 (channels cut where the reference would take long),
/// with more than one block of tiles, chunks of 32 tiles and a ragged last tile row.
#[test]
fn winograd_real_layers_within_bound() {
    let mut worst = 0f64;
    for p in [
        conv(1, 64, 64, 56, 56, [1; 4]),
        conv(1, 256, 32, 14, 14, [1; 4]),
        conv(1, 128, 32, 56, 56, [1; 4]),
        conv(1, 128, 16, 28, 28, [1; 4]),
        conv(1, 32, 16, 130, 131, [1; 4]),
        conv(1, 16, 8, 9, 150, [0, 2, 1, 0]),
    ] {
        worst = worst.max(check(&p, Activation::Relu, true, 7).unwrap());
    }
    println!("winograd: worst |error| / M = {worst:.2e} (bound {BOUND:e})");
}

/// The bound is meaningful: the direct (im2col) kernel is 16 times inside it on the same
/// layers, so a Winograd bug that loses precision cannot hide under a loose bound.
#[test]
fn im2col_is_within_a_sixteenth_of_the_bound() {
    for p in [
        conv(1, 64, 64, 56, 56, [1; 4]),
        conv(2, 12, 9, 11, 13, [1, 0, 2, 1]),
    ] {
        let run = |x: &[f32], w: &[f32], bias: Option<&[f32]>, out: &mut [f32]| {
            let mut scratch = vec![0f32; p.scratch_len()];
            (PORTABLE.conv2d)(&p, x, w, bias, Activation::None, &mut scratch, out);
        };
        let (b, s) = (BOUND / 16.0, Scale::Window);
        check_with(&p, Activation::None, true, 3, b, s, "im2col", &run).unwrap();
    }
}

/// A geometry whose element counts wrap must be refused by the length checks, as must a
/// geometry the kernel does not implement.
#[test]
fn wrapped_sizes_and_other_shapes_are_refused() {
    const HUGE: usize = 1 << (usize::BITS - 2);
    let p = conv(1, 2, 2, HUGE, 6, [1; 4]);
    for kt in std::iter::once(PORTABLE).chain(common::isas("wrapped sizes")) {
        assert!(
            common::refused_as_short(|| {
                (kt.conv2d_winograd)(
                    &p,
                    &[],
                    &[0.0; 144],
                    None,
                    Activation::None,
                    &mut [],
                    &mut [],
                )
            }),
            "{}: conv2d_winograd accepted wrapped sizes",
            kt.isa
        );
        let mut strided = conv(1, 1, 1, 6, 6, [0; 4]);
        strided.stride = [2, 2];
        let refused = std::panic::catch_unwind(|| {
            (kt.conv2d_winograd)(
                &strided,
                &[0.0; 36],
                &[0.0; 36],
                None,
                Activation::None,
                &mut [0.0; 1000],
                &mut [0.0; 4],
            )
        });
        assert!(refused.is_err(), "{}: ran a stride-2 conv", kt.isa);
    }
}
