//! Unit tests of the generic kernels at 8 lanes ([`Avx2Fma`]) and at 16 lanes ([`Emu16`], the
//! AVX-512 lane count emulated with AVX2), against the portable kernels and `f64` definitions.
//!
//! The integration harnesses in `kernels/tests/` test the real tables of every ISA the
//! machine has; these tests add the 16-lane logic on machines without AVX-512, and the
//! depthwise kernel before `conv.rs` routes the table's `conv2d` to it.

extern crate std;

use super::emu::Emu16;
use super::vector::{Avx2Fma, Simd};
use super::{depthwise, eltwise, math, norm, pool};
use crate::arch::portable;
use crate::testutil::XorShift;
use crate::{Activation, BinaryOp, Broadcast, Conv2d, Pool2d};
use std::format;
use std::vec;
use std::vec::Vec;

fn avx2() -> Option<Avx2Fma> {
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: both features were just detected.
        Some(unsafe { Avx2Fma::new_unchecked() })
    } else {
        std::eprintln!("skipped: this CPU has no AVX2+FMA");
        None
    }
}

/// Runs `f` at both lane counts.
fn both(mut f: impl FnMut(&str, Lanes)) {
    if let Some(s) = avx2() {
        f("8 lanes", Lanes::Eight(s));
        f("16 lanes", Lanes::Sixteen(Emu16(s)));
    }
}

#[derive(Clone, Copy)]
enum Lanes {
    Eight(Avx2Fma),
    Sixteen(Emu16),
}

/// Dispatches a generic call on the lane count.
macro_rules! on {
    ($lanes:expr, $s:ident => $body:expr) => {
        match $lanes {
            Lanes::Eight($s) => $body,
            Lanes::Sixteen($s) => $body,
        }
    };
}

/// `got` equals `want` in NaN-ness and infinities, and is within `tol * scale[i]` otherwise.
#[track_caller]
fn assert_close(got: &[f32], want: &[f32], scale: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for i in 0..got.len() {
        let (g, w) = (got[i], want[i]);
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= tol * scale[i]
        };
        assert!(ok, "{what}: element {i}: got {g:e}, want {w:e}");
    }
}

/// Bit-identical, except that any NaN matches any NaN.
#[track_caller]
fn assert_same(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for i in 0..got.len() {
        let (g, w) = (got[i], want[i]);
        assert!(
            g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
            "{what}: element {i}: got {g:e}, want {w:e}"
        );
    }
}

/// Values in `[-1, 1)` with an occasional NaN, infinity or signed zero when `specials`.
fn data(rng: &mut XorShift, n: usize, specials: bool) -> Vec<f32> {
    (0..n)
        .map(|_| {
            if specials && rng.below(23) == 0 {
                [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 0.0][rng.below(5)]
            } else {
                rng.uniform(-1.0, 1.0)
            }
        })
        .collect()
}

const ACTS: [Activation; 6] = [
    Activation::None,
    Activation::Relu,
    Activation::Clip { min: 0.0, max: 6.0 },
    Activation::LeakyRelu { alpha: 0.1 },
    Activation::Sigmoid,
    Activation::Tanh,
];

/// Applies a lane-wise function to a slice, one vector at a time.
fn lanewise<S: Simd>(s: S, x: &[f32], f: impl Fn(S, S::V) -> S::V) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for (o, c) in out.chunks_mut(S::LANES).zip(x.chunks(S::LANES)) {
        s.store_partial(o, f(s, s.load_partial(c)));
    }
    out
}

fn rel_err(got: f32, want: f64) -> f64 {
    if want == 0.0 {
        f64::from(got).abs()
    } else {
        ((f64::from(got) - want) / want).abs()
    }
}

#[test]
fn exp_tanh_sigmoid_match_f64_within_1e6() {
    both(|what, lanes| {
        let mut rng = XorShift::new(5);
        let grid = |lo: f32, hi: f32, rng: &mut XorShift| -> Vec<f32> {
            let n = 20_000;
            let mut v: Vec<f32> = (0..=n)
                .map(|i| lo + (hi - lo) * (i as f32 / n as f32))
                .collect();
            v.extend((0..n).map(|_| rng.uniform(lo, hi)));
            v
        };
        // exp over the range where the result is a normal f32.
        let x = grid(-87.3, 88.72, &mut rng);
        let got = on!(lanes, s => lanewise(s, &x, math::exp));
        for (&g, &xi) in got.iter().zip(&x) {
            let e = rel_err(g, f64::from(xi).exp());
            assert!(e <= 1e-6, "{what} exp({xi}) = {g}, rel err {e}");
        }
        let x = grid(-12.0, 12.0, &mut rng);
        let got = on!(lanes, s => lanewise(s, &x, math::tanh));
        for (&g, &xi) in got.iter().zip(&x) {
            let e = rel_err(g, f64::from(xi).tanh());
            assert!(e <= 1e-6, "{what} tanh({xi}) = {g}, rel err {e}");
        }
        // tanh keeps its relative accuracy for tiny inputs.
        let tiny: Vec<f32> = (0..20_000)
            .map(|_| rng.uniform(-1.0, 1.0) * 10f32.powi(-(rng.below(38) as i32)))
            .collect();
        let got = on!(lanes, s => lanewise(s, &tiny, math::tanh));
        for (&g, &xi) in got.iter().zip(&tiny) {
            let e = rel_err(g, f64::from(xi).tanh());
            assert!(e <= 1e-6, "{what} tanh({xi:e}) = {g:e}, rel err {e}");
        }
        let x = grid(-87.0, 30.0, &mut rng);
        let got = on!(lanes, s => lanewise(s, &x, math::sigmoid));
        for (&g, &xi) in got.iter().zip(&x) {
            let want = 1.0 / (1.0 + (-f64::from(xi)).exp());
            let e = rel_err(g, want);
            assert!(e <= 1e-6, "{what} sigmoid({xi}) = {g}, rel err {e}");
        }
    });
}

#[test]
fn exp_tanh_sigmoid_special_values() {
    both(|what, lanes| {
        let x = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            1e30,
            -1e30,
            88.8,
            -104.5,
            -95.0,
            1.0,
            -1.0,
        ];
        let e = on!(lanes, s => lanewise(s, &x, math::exp));
        let t = on!(lanes, s => lanewise(s, &x, math::tanh));
        let g = on!(lanes, s => lanewise(s, &x, math::sigmoid));
        let w = what;
        assert!(e[0].is_nan() && t[0].is_nan() && g[0].is_nan(), "{w}: NaN");
        assert_eq!((e[1], t[1], g[1]), (f32::INFINITY, 1.0, 1.0), "{w}: +inf");
        assert_eq!((e[2], t[2], g[2]), (0.0, -1.0, 0.0), "{w}: -inf");
        assert_eq!((e[3], t[3].to_bits(), g[3]), (1.0, 0, 0.5), "{w}: 0");
        assert_eq!(
            (e[4], t[4].to_bits(), g[4]),
            (1.0, (-0.0f32).to_bits(), 0.5),
            "{w}: -0"
        );
        assert_eq!((e[5], t[5], g[5]), (f32::INFINITY, 1.0, 1.0), "{w}: 1e30");
        assert_eq!((e[6], t[6], g[6]), (0.0, -1.0, 0.0), "{w}: -1e30");
        assert_eq!(e[7], f32::INFINITY, "{w}: exp overflow");
        assert_eq!(e[8], 0.0, "{w}: exp underflow");
        // A subnormal result is rounded, not flushed: e^-95 = 5.5e-42.
        let want = (-95f64).exp() as f32;
        assert!((e[9] - want).abs() <= 2e-45, "{w}: e^-95 = {:e}", e[9]);
        assert!((e[10] - core::f32::consts::E).abs() <= 3e-7, "{w}: e");
        assert!((g[11] - 0.268_941_43).abs() <= 1e-7, "{w}: sigmoid(-1)");
    });
}

#[test]
fn activations_are_bit_identical_to_the_scalar_definition() {
    both(|what, lanes| {
        let mut rng = XorShift::new(9);
        let x = data(&mut rng, 301, true);
        for act in ACTS {
            let mut want = vec![0.0; x.len()];
            portable::unary(act, &x, &mut want);
            let mut got = vec![f32::NAN; x.len()];
            on!(lanes, s => eltwise::unary(s, act, &x, &mut got));
            let mut inplace = x.clone();
            on!(lanes, s => eltwise::unary_inplace(s, act, &mut inplace));
            // The portable in-place identity leaves -0.0 alone; out of place it adds 0.0.
            let mut want_inplace = x.clone();
            portable::unary_inplace(act, &mut want_inplace);
            let w = format!("{what} {act:?}");
            if matches!(act, Activation::Sigmoid | Activation::Tanh) {
                let scale: Vec<f32> = want.iter().map(|v| v.abs()).collect();
                assert_close(&got, &want, &scale, 1e-6, &w);
                assert_close(&inplace, &want, &scale, 1e-6, &w);
            } else {
                assert_same(&got, &want, &w);
                assert_same(&inplace, &want_inplace, &w);
            }
        }
        // Degenerate clip bounds pick the same bound as the scalar definition.
        let act = Activation::Clip {
            min: 1.0,
            max: -1.0,
        };
        let mut want = vec![0.0; x.len()];
        portable::unary(act, &x, &mut want);
        let mut got = vec![0.0; x.len()];
        on!(lanes, s => eltwise::unary(s, act, &x, &mut got));
        assert_same(&got, &want, &format!("{what} min > max"));
    });
}

#[test]
fn unary_lengths_around_the_vector_size() {
    both(|what, lanes| {
        let mut rng = XorShift::new(13);
        for n in 0..70 {
            let x = data(&mut rng, n, false);
            let mut out = vec![f32::NAN; n + 3];
            on!(lanes, s => eltwise::unary(s, Activation::Relu, &x, &mut out));
            let mut want = vec![f32::NAN; n + 3];
            portable::unary(Activation::Relu, &x, &mut want);
            assert_same(&out, &want, &format!("{what} n = {n}"));
            let mut inplace = x.clone();
            on!(lanes, s => eltwise::unary_inplace(s, Activation::Relu, &mut inplace));
            assert_same(&inplace, &want[..n], &format!("{what} in place n = {n}"));
        }
    });
}

/// Row-major strides of `shape` with 0 where it broadcasts against `out`.
fn strides(out: [usize; 4], shape: [usize; 4]) -> [usize; 4] {
    let mut s = [0; 4];
    let mut step = 1;
    for d in (0..4).rev() {
        s[d] = if shape[d] == 1 && out[d] != 1 {
            0
        } else {
            step
        };
        step *= shape[d];
    }
    s
}

#[test]
fn binary_is_bit_identical_to_portable() {
    both(|what, lanes| {
        let mut rng = XorShift::new(17);
        for case in 0..300usize {
            let out: [usize; 4] = core::array::from_fn(|_| 1 + rng.below(6));
            let mut out = out;
            if case.is_multiple_of(3) {
                out[3] = 1 + rng.below(40);
            }
            let pick = |rng: &mut XorShift| -> [usize; 4] {
                match rng.below(5) {
                    0 => out,
                    1 => [1; 4],
                    2 => [1, out[1], 1, 1],
                    _ => core::array::from_fn(|d| if rng.below(2) == 0 { 1 } else { out[d] }),
                }
            };
            let (sa, sb) = (pick(&mut rng), pick(&mut rng));
            let a = data(&mut rng, sa.iter().product(), true);
            let b = data(&mut rng, sb.iter().product(), true);
            let bc = Broadcast {
                shape: out,
                a_strides: strides(out, sa),
                b_strides: strides(out, sb),
            };
            let total: usize = out.iter().product();
            for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
                let w = format!("{what} {op:?} {out:?} {sa:?} {sb:?}");
                let mut want = vec![0.0; total];
                portable::binary(op, &bc, &a, &b, &mut want);
                let mut got = vec![f32::NAN; total];
                on!(lanes, s => eltwise::binary(s, op, &bc, &a, &b, &mut got));
                assert_same(&got, &want, &w);
                if sa == out {
                    let mut acc = a.clone();
                    on!(lanes, s => eltwise::binary_inplace(s, op, &bc, &mut acc, &b, true));
                    assert_same(&acc, &want, &format!("{w} in place lhs"));
                }
                if sb == out {
                    let mut acc = b.clone();
                    on!(lanes, s => eltwise::binary_inplace(s, op, &bc, &mut acc, &a, false));
                    assert_same(&acc, &want, &format!("{w} in place rhs"));
                }
            }
        }
    });
}

/// The standard output size, `floor((in + pads - k) / stride) + 1`.
fn out_len(input: usize, k: usize, stride: usize, pads: usize) -> usize {
    (input + pads).saturating_sub(k) / stride + 1
}

#[test]
fn depthwise_matches_portable() {
    both(|what, lanes| {
        let mut rng = XorShift::new(23);
        for case in 0..400usize {
            let k = [3, 5][rng.below(2)];
            let stride = 1 + rng.below(2);
            let pad: [usize; 4] = core::array::from_fn(|_| rng.below(k));
            let (h, w) = if case.is_multiple_of(4) {
                (1 + rng.below(5), 1 + rng.below(5))
            } else {
                (k + rng.below(40), k + rng.below(40))
            };
            // Up to 19 channels: whole and partial groups of 8 and 16 channels for the
            // channels-in-lanes kernel.
            let c = 1 + rng.below(19);
            let mut p = Conv2d {
                batch: 1 + rng.below(2),
                c_in: c,
                h,
                w,
                c_out: c,
                kh: k,
                kw: k,
                stride: [stride; 2],
                dilation: [1, 1],
                pad,
                groups: c,
                out_h: out_len(h, k, stride, pad[0] + pad[2]),
                out_w: out_len(w, k, stride, pad[1] + pad[3]),
            };
            // Now and then an output larger than the input supports: it must read padding.
            if case.is_multiple_of(7) {
                p.out_h += rng.below(3);
                p.out_w += rng.below(3);
            }
            check_depthwise(lanes, &p, &mut rng, &format!("{what} {p:?}"));
        }
    });
}

/// Shapes the random ones rarely reach: channels-in-lanes bands of several rows over a tall
/// plane, bands of one row over a plane so wide that its window offsets are computed rather
/// than tabulated, and a plane narrower than a vector over many channels.
#[test]
fn depthwise_lanes_bands() {
    both(|what, lanes| {
        let mut rng = XorShift::new(31);
        let base = Conv2d {
            batch: 1,
            c_in: 19,
            h: 41,
            w: 250,
            c_out: 19,
            kh: 3,
            kw: 3,
            stride: [2, 2],
            dilation: [1, 1],
            pad: [1; 4],
            groups: 19,
            out_h: 21,
            out_w: 125,
        };
        let cases = [
            base,
            Conv2d {
                kh: 5,
                kw: 5,
                pad: [2, 1, 2, 2],
                out_w: 124,
                ..base
            },
            Conv2d {
                h: 4,
                w: 2201,
                out_h: 2,
                out_w: 1101,
                ..base
            },
            Conv2d {
                c_in: 37,
                c_out: 37,
                groups: 37,
                h: 7,
                w: 7,
                stride: [1, 1],
                out_h: 7,
                out_w: 7,
                ..base
            },
        ];
        for p in cases {
            assert!(crate::params::lanes_band(&p).is_some(), "{p:?}");
            check_depthwise(lanes, &p, &mut rng, &format!("{what} {p:?}"));
        }
    });
}

#[test]
fn depthwise_falls_back_for_other_shapes() {
    both(|what, lanes| {
        let mut rng = XorShift::new(29);
        let base = Conv2d {
            batch: 1,
            c_in: 3,
            h: 9,
            w: 11,
            c_out: 3,
            kh: 3,
            kw: 3,
            stride: [1, 1],
            dilation: [1, 1],
            pad: [1; 4],
            groups: 3,
            out_h: 9,
            out_w: 11,
        };
        let cases = [
            Conv2d {
                dilation: [2, 2],
                out_h: 7,
                out_w: 9,
                ..base
            },
            Conv2d {
                kh: 7,
                kw: 7,
                out_h: 5,
                out_w: 7,
                ..base
            },
            Conv2d {
                kh: 1,
                kw: 1,
                pad: [0; 4],
                ..base
            },
            Conv2d {
                stride: [1, 2],
                out_w: 6,
                ..base
            },
            Conv2d {
                stride: [3, 3],
                out_h: 3,
                out_w: 4,
                ..base
            },
            Conv2d {
                h: 0,
                out_h: 0,
                ..base
            },
        ];
        for p in cases {
            check_depthwise(lanes, &p, &mut rng, &format!("{what} {p:?}"));
        }
    });
}

fn check_depthwise(lanes: Lanes, p: &Conv2d, rng: &mut XorShift, what: &str) {
    let n_in = p.batch * p.c_in * p.h * p.w;
    let n_out = p.batch * p.c_out * p.out_h * p.out_w;
    let n_w = p.c_out * p.kh * p.kw;
    let specials = rng.below(4) == 0;
    let input = data(rng, n_in, specials);
    let weight = data(rng, n_w, false);
    let bias = data(rng, p.c_out, false);
    let abs = |v: &[f32]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    // The sum of the absolute terms bounds the rounding error of any summation order.
    let mut scale = vec![0.0; n_out];
    let (ai, aw, ab) = (abs(&input), abs(&weight), abs(&bias));
    // NaN scratch: stale scratch would poison the result, and an overrun panics.
    let mut scratch = vec![f32::NAN; p.scratch_len()];
    portable::conv2d(
        p,
        &ai,
        &aw,
        Some(&ab),
        Activation::None,
        &mut scratch,
        &mut scale,
    );
    for s in &mut scale {
        *s += 1.0;
    }
    for act in ACTS {
        let bias = (rng.below(2) == 0).then_some(&bias[..]);
        let mut want = vec![0.0; n_out];
        portable::conv2d(p, &input, &weight, bias, act, &mut scratch, &mut want);
        let mut got = vec![f32::NAN; n_out + 5];
        scratch.fill(f32::NAN);
        on!(lanes, s => depthwise::conv2d(s, p, &input, &weight, bias, act, &mut scratch, &mut got));
        assert_close(
            &got[..n_out],
            &want,
            &scale,
            1e-5,
            &format!("{what} {act:?}"),
        );
        assert!(
            got[n_out..].iter().all(|x| x.is_nan()),
            "{what}: wrote past the output"
        );
    }
}

#[test]
fn scale_shift_matches_portable() {
    both(|what, lanes| {
        let mut rng = XorShift::new(31);
        for _ in 0..60 {
            let (batch, channels, spatial) = (1 + rng.below(2), 1 + rng.below(5), rng.below(60));
            let n = batch * channels * spatial;
            let x = data(&mut rng, n, true);
            let scale = data(&mut rng, channels, false);
            let shift = data(&mut rng, channels, false);
            for act in ACTS {
                let w = format!("{what} [{batch}, {channels}, {spatial}] {act:?}");
                let mut want = vec![0.0; n];
                portable::scale_shift(batch, channels, spatial, &x, &scale, &shift, act, &mut want);
                let mut got = vec![f32::NAN; n];
                on!(lanes, s => norm::scale_shift(s, batch, channels, spatial, &x, &scale, &shift, act, &mut got));
                let mut inplace = x.clone();
                on!(lanes, s => norm::scale_shift_inplace(s, batch, channels, spatial, &mut inplace, &scale, &shift, act));
                if matches!(act, Activation::Sigmoid | Activation::Tanh) {
                    let sc: Vec<f32> = want.iter().map(|v| v.abs()).collect();
                    assert_close(&got, &want, &sc, 1e-6, &w);
                    assert_close(&inplace, &want, &sc, 1e-6, &w);
                } else {
                    assert_same(&got, &want, &w);
                    assert_same(&inplace, &want, &w);
                }
            }
        }
    });
}

#[test]
fn softmax_matches_portable() {
    both(|what, lanes| {
        let mut rng = XorShift::new(37);
        for case in 0..150usize {
            let outer = 1 + rng.below(3);
            let len = 1 + rng.below(if case.is_multiple_of(2) { 5 } else { 90 });
            let inner = match case % 3 {
                0 => 1,
                1 => 1 + rng.below(20),
                _ => 1 + rng.below(80),
            };
            let n = outer * len * inner;
            let mut x: Vec<f32> = (0..n).map(|_| rng.uniform(-10.0, 10.0)).collect();
            if case.is_multiple_of(10) {
                let i = rng.below(n);
                x[i] = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30][rng.below(4)];
            }
            let w = format!("{what} [{outer}, {len}, {inner}]");
            let mut want = vec![0.0; n];
            portable::softmax(outer, len, inner, &x, &mut want);
            let mut got = vec![f32::NAN; n];
            on!(lanes, s => norm::softmax(s, outer, len, inner, &x, &mut got));
            let mut inplace = x.clone();
            on!(lanes, s => norm::softmax_inplace(s, outer, len, inner, &mut inplace));
            let sc: Vec<f32> = want.iter().map(|v| v.abs() + 1e-30).collect();
            assert_close(&got, &want, &sc, 1e-5, &w);
            assert_close(&inplace, &want, &sc, 1e-5, &format!("{w} in place"));
        }
    });
}

/// Max and average pooling of `x` on `lanes` give the portable kernel's bits.
#[track_caller]
fn pools_match_portable(what: &str, lanes: Lanes, p: &Pool2d, x: &[f32]) {
    let n_out = p.batch * p.channels * p.out_h * p.out_w;
    let wh = format!("{what} {p:?}");
    let mut want = vec![0.0; n_out];
    let mut got = vec![f32::NAN; n_out];
    portable::max_pool2d(p, x, &mut want);
    on!(lanes, s => pool::max_pool2d(s, p, x, &mut got));
    assert_same(&got, &want, &format!("max {wh}"));
    portable::avg_pool2d(p, x, &mut want);
    got.fill(f32::NAN);
    on!(lanes, s => pool::avg_pool2d(s, p, x, &mut got));
    assert_same(&got, &want, &format!("avg {wh}"));
}

#[test]
fn pooling_is_bit_identical_to_portable() {
    both(|what, lanes| {
        let mut rng = XorShift::new(41);
        for case in 0..300usize {
            let kh = 1 + rng.below(4);
            let kw = 1 + rng.below(4);
            let stride = [1 + rng.below(3), 1 + rng.below(3)];
            let pad: [usize; 4] = [rng.below(kh), rng.below(kw), rng.below(kh), rng.below(kw)];
            let h = kh + rng.below(20);
            let w = kw + rng.below(if case.is_multiple_of(2) { 12 } else { 70 });
            let ceil = rng.below(2) == 0;
            let len = |i: usize, k: usize, s: usize, p: usize| {
                let span = i + p - k;
                (if ceil { span.div_ceil(s) } else { span / s }) + 1
            };
            let p = Pool2d {
                batch: 1 + rng.below(2),
                channels: 1 + rng.below(3),
                h,
                w,
                kh,
                kw,
                stride,
                pad,
                out_h: len(h, kh, stride[0], pad[0] + pad[2]),
                out_w: len(w, kw, stride[1], pad[1] + pad[3]),
                count_include_pad: rng.below(2) == 0,
            };
            let x = data(
                &mut rng,
                p.batch * p.channels * h * w,
                case.is_multiple_of(3),
            );
            pools_match_portable(what, lanes, &p, &x);
        }
    });
}

/// The pools of the benchmark's networks (SqueezeNet, Inception-v2, ResNet-50, DenseNet-121:
/// the row-sharing max folds, the flat stride-1 planes, the 8-lane rows of the 16-lane
/// kernels) and a few more "same"-size stride-1 windows, on data made of few distinct values
/// (ties between +0.0 and -0.0 in most windows, so that the order of the folds shows in the
/// bits) with NaNs in some planes: one on a row two windows share, one on a plane's edge.
#[test]
fn pooling_network_shapes_bit_identical_to_portable() {
    // (channels, size, window, stride, padding before, padding after)
    const SHAPES: [(usize, usize, usize, usize, usize, usize); 22] = [
        (2, 109, 3, 2, 0, 0),
        (2, 54, 3, 2, 0, 1),
        (2, 27, 3, 2, 0, 0),
        (2, 112, 3, 2, 1, 1),
        (2, 112, 3, 2, 0, 1),
        (2, 56, 3, 2, 0, 1),
        (3, 28, 3, 2, 0, 1),
        (3, 14, 3, 2, 0, 1),
        (3, 28, 3, 1, 1, 1),
        (3, 14, 3, 1, 1, 1),
        (3, 7, 3, 1, 1, 1),
        (2, 56, 2, 2, 0, 0),
        (3, 28, 2, 2, 0, 0),
        (3, 14, 2, 2, 0, 0),
        (2, 13, 5, 1, 2, 2),
        (2, 31, 5, 1, 2, 2),
        (2, 9, 2, 1, 0, 1),
        (2, 9, 4, 1, 2, 1),
        (2, 33, 1, 1, 0, 0),
        (2, 7, 7, 1, 0, 0),
        (2, 12, 8, 2, 3, 4),
        (2, 12, 9, 1, 4, 4),
    ];
    both(|what, lanes| {
        let mut rng = XorShift::new(47);
        for (c, size, k, stride, before, after) in SHAPES {
            let out = (size + before + after - k) / stride + 1;
            for include_pad in [false, true] {
                let p = Pool2d {
                    batch: 1,
                    channels: c,
                    h: size,
                    w: size,
                    kh: k,
                    kw: k,
                    stride: [stride; 2],
                    pad: [before, before, after, after],
                    out_h: out,
                    out_w: out,
                    count_include_pad: include_pad,
                };
                let values = [-1.0, -0.0, 0.0, 0.5, 1.0];
                let mut x: Vec<f32> = (0..c * size * size).map(|_| values[rng.below(5)]).collect();
                // Plane 1: a NaN on row 2 (shared by the first two 3x3 stride-2 windows) and
                // one in the last column of the last row.
                let plane = size * size;
                x[plane + 2 * size + size / 2] = f32::NAN;
                x[2 * plane - 1] = f32::NAN;
                pools_match_portable(what, lanes, &p, &x);
            }
        }
    });
}

#[test]
fn global_avg_pool_matches_portable() {
    both(|what, lanes| {
        let mut rng = XorShift::new(43);
        for spatial in (0..80).chain([196, 3136]) {
            let (batch, channels) = (1 + rng.below(2), 1 + rng.below(4));
            let x = data(&mut rng, batch * channels * spatial, spatial % 11 == 5);
            let mut want = vec![0.0; batch * channels];
            portable::global_avg_pool(batch, channels, spatial, &x, &mut want);
            let mut got = vec![f32::NAN; batch * channels];
            on!(lanes, s => pool::global_avg_pool(s, batch, channels, spatial, &x, &mut got));
            let sc = vec![1.0; want.len()];
            assert_close(&got, &want, &sc, 1e-5, &format!("{what} spatial {spatial}"));
        }
    });
}
