#![cfg(target_arch = "aarch64")]
//! NEON smoke test, run under qemu-aarch64 by `.ci/cross`: the NEON table must exist on an
//! aarch64 CPU, and its GEMM, dense, conv2d (every routing branch), element-wise and
//! scale/shift kernels must agree with the portable reference on hand-picked shapes that hit
//! the edges of the NEON blocking (micro-tile and packing-block tails, the depthwise vector and
//! scalar column ranges, stride 1, 2 and 3).
//!
//! The per-family proptest harnesses compare every available ISA with the portable kernels on
//! random shapes; this file is the deterministic, NEON-specific floor under them. GEMM is also
//! checked against a naive `f64` product, so a bug shared by both implementations would still
//! show.

use kiln_kernels::{for_isa, Activation, BinaryOp, Broadcast, Conv2d, Isa, Kernels, PORTABLE};

/// xorshift32: reproducible data without a dependency.
struct Rng(u32);

impl Rng {
    fn vec(&mut self, len: usize) -> Vec<f32> {
        (0..len)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 17;
                self.0 ^= self.0 << 5;
                (self.0 >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }
}

fn neon() -> Kernels {
    let k = for_isa(Isa::Neon).expect("an aarch64 CPU (and qemu-aarch64) has NEON");
    assert_eq!(k.isa, Isa::Neon);
    k
}

const ACTS: [Activation; 6] = [
    Activation::None,
    Activation::Relu,
    Activation::Clip {
        min: -0.25,
        max: 0.5,
    },
    Activation::LeakyRelu { alpha: 0.1 },
    Activation::Sigmoid,
    Activation::Tanh,
];

/// `got` within `tol * max(|want|, 1)` of `want`, element by element.
#[track_caller]
fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || (g - w).abs() <= tol * w.abs().max(1.0);
        assert!(ok, "{what}: element {i}: neon {g}, portable {w}");
    }
}

/// Bit-identical, except that any NaN matches any NaN.
#[track_caller]
fn assert_same(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = (g.is_nan() && w.is_nan()) || g.to_bits() == w.to_bits();
        assert!(ok, "{what}: element {i}: neon {g:e}, portable {w:e}");
    }
}

#[test]
fn neon_is_available_and_selected_by_default() {
    let k = neon();
    println!("neon table: {:?}", k.isa);
    if std::env::var_os("KILN_ISA").is_none() {
        assert_eq!(kiln_kernels::best().isa, Isa::Neon);
    }
}

#[test]
fn gemm_matches_naive_and_portable() {
    let k = neon();
    let mut rng = Rng(7);
    // Full 8x12 tiles, row and column tails, more than one 48-column block, more than one
    // 256-deep block, a single row, and an empty depth.
    let shapes = [
        (1, 1, 1),
        (8, 12, 4),
        (7, 13, 5),
        (9, 25, 3),
        (16, 61, 33),
        (17, 50, 257),
        (3, 100, 520),
        (1, 37, 64),
        (20, 1, 9),
        (4, 5, 0),
    ];
    for (m, n, kk) in shapes {
        let a = rng.vec(m * kk);
        let b = rng.vec(kk * n);
        let mut got = vec![f32::NAN; m * n];
        let mut want = vec![f32::NAN; m * n];
        (k.gemm)(m, n, kk, &a, &b, &mut got);
        (PORTABLE.gemm)(m, n, kk, &a, &b, &mut want);
        let what = format!("gemm {m}x{n}x{kk}");
        for i in 0..m {
            for j in 0..n {
                let (mut s, mut mag) = (0.0f64, 0.0f64);
                for p in 0..kk {
                    let t = f64::from(a[i * kk + p]) * f64::from(b[p * n + j]);
                    s += t;
                    mag += t.abs();
                }
                let g = f64::from(got[i * n + j]);
                assert!(
                    (g - s).abs() <= 1e-6 * (1.0 + mag),
                    "{what}: C[{i},{j}] = {g}, naive {s}"
                );
            }
        }
        assert_close(&got, &want, 1e-4, &what);
    }
}

#[test]
fn dense_matches_portable() {
    let k = neon();
    let mut rng = Rng(11);
    for (batch, n_in, n_out) in [(1, 1, 1), (1, 20, 32), (3, 37, 10), (2, 0, 5), (1, 130, 7)] {
        let x = rng.vec(batch * n_in);
        let w = rng.vec(n_out * n_in);
        let bias = rng.vec(n_out);
        for (bias, act) in [(None, Activation::None), (Some(&bias[..]), ACTS[3])] {
            let mut got = vec![f32::NAN; batch * n_out];
            let mut want = vec![f32::NAN; batch * n_out];
            (k.dense)(batch, n_in, n_out, &x, &w, bias, act, &mut got);
            (PORTABLE.dense)(batch, n_in, n_out, &x, &w, bias, act, &mut want);
            let what = format!("dense {batch}x{n_in}->{n_out} {act:?}");
            assert_close(&got, &want, 1e-5, &what);
        }
    }
}

/// A convolution with the standard output size.
#[allow(clippy::too_many_arguments)]
fn conv(
    batch: usize,
    c_in: usize,
    [h, w]: [usize; 2],
    c_out: usize,
    [kh, kw]: [usize; 2],
    stride: usize,
    dilation: usize,
    pad: usize,
    groups: usize,
) -> Conv2d {
    let out = |len: usize, k: usize| (len + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
    Conv2d {
        batch,
        c_in,
        h,
        w,
        c_out,
        kh,
        kw,
        stride: [stride; 2],
        dilation: [dilation; 2],
        pad: [pad; 4],
        groups,
        out_h: out(h, kh),
        out_w: out(w, kw),
    }
}

#[test]
fn conv2d_matches_portable_on_every_branch() {
    let k = neon();
    let mut rng = Rng(13);
    let cases = [
        // Pointwise: a GEMM straight on the activations (with groups too).
        conv(2, 5, [7, 6], 9, [1, 1], 1, 1, 0, 1),
        conv(1, 8, [5, 5], 12, [1, 1], 1, 1, 0, 4),
        // im2col + GEMM: same padding, stride 2 with groups, dilation, a 1x1 with stride.
        conv(2, 3, [9, 11], 10, [3, 3], 1, 1, 1, 1),
        conv(1, 6, [13, 10], 8, [3, 3], 2, 1, 1, 2),
        conv(1, 4, [12, 12], 5, [3, 3], 1, 2, 2, 1),
        conv(1, 6, [8, 9], 7, [1, 1], 2, 1, 0, 1),
        // Depthwise: 3x3 and 5x5 at stride 1 and 2 on rows wide enough for vectors, a
        // run-time kernel width, dilation, stride 3 (all scalar), a 1-wide image.
        conv(2, 3, [11, 19], 3, [3, 3], 1, 1, 1, 3),
        conv(1, 4, [14, 23], 4, [3, 3], 2, 1, 1, 4),
        conv(1, 2, [12, 21], 2, [5, 5], 1, 1, 2, 2),
        conv(1, 2, [15, 30], 2, [5, 5], 2, 1, 2, 2),
        conv(1, 3, [9, 17], 3, [2, 4], 1, 1, 1, 3),
        conv(1, 2, [13, 25], 2, [3, 3], 1, 2, 2, 2),
        conv(1, 2, [10, 20], 2, [3, 3], 3, 1, 1, 2),
        conv(1, 2, [6, 1], 2, [3, 3], 1, 1, 1, 2),
    ];
    for p in cases {
        let input = rng.vec(p.batch * p.c_in * p.h * p.w);
        let weight = rng.vec(p.c_out * (p.c_in / p.groups) * p.kh * p.kw);
        let bias = rng.vec(p.c_out);
        let len = p.batch * p.c_out * p.out_h * p.out_w;
        for (i, act) in ACTS.into_iter().enumerate() {
            let bias = (i % 2 == 1).then_some(&bias[..]);
            // Scratch of exactly the contract's size, poisoned with NaN.
            let mut scratch = vec![f32::NAN; p.scratch_len()];
            let mut got = vec![f32::NAN; len];
            (k.conv2d)(&p, &input, &weight, bias, act, &mut scratch, &mut got);
            let mut scratch = vec![f32::NAN; p.scratch_len()];
            let mut want = vec![f32::NAN; len];
            (PORTABLE.conv2d)(&p, &input, &weight, bias, act, &mut scratch, &mut want);
            let what = format!("{p:?} bias {} {act:?}", bias.is_some());
            assert_close(&got, &want, 1e-5, &what);
        }
    }
}

#[test]
fn unary_is_bit_identical_to_portable() {
    let k = neon();
    let mut rng = Rng(17);
    for len in [0, 1, 3, 4, 5, 8, 17, 64, 101] {
        let mut x = rng.vec(len);
        // The values where a careless vector form differs: NaN, signed zeros, infinities,
        // and the clip bounds themselves.
        let specials = [
            f32::NAN,
            -0.0,
            0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.25,
            0.5,
        ];
        for (v, s) in x.iter_mut().zip(specials.iter().cycle()).step_by(3) {
            *v = *s;
        }
        for act in ACTS {
            let mut got = vec![f32::NAN; len];
            let mut want = vec![f32::NAN; len];
            (k.unary)(act, &x, &mut got);
            (PORTABLE.unary)(act, &x, &mut want);
            assert_same(&got, &want, &format!("unary {act:?} len {len}"));
            // In place, the identity is skipped entirely (`-0.0` stays `-0.0`), so it is
            // compared with the portable in-place kernel, not with `want`.
            let mut inplace = x.clone();
            let mut want_inplace = x.clone();
            (k.unary_inplace)(act, &mut inplace);
            (PORTABLE.unary_inplace)(act, &mut want_inplace);
            let what = format!("unary_inplace {act:?} len {len}");
            assert_same(&inplace, &want_inplace, &what);
        }
    }
}

#[test]
fn binary_is_bit_identical_to_portable() {
    let k = neon();
    let mut rng = Rng(19);
    // [2, 3, 4, 7] against itself, against a per-channel [1, 3, 1, 1], against a row
    // [1, 1, 1, 7] and against a strided (transposed) operand.
    let shape = [2, 3, 4, 7];
    let full = [84, 28, 7, 1];
    let cases = [
        (full, full),
        (full, [0, 1, 0, 0]),
        ([0, 1, 0, 0], full),
        (full, [0, 0, 0, 1]),
        (full, [84, 28, 1, 4]),
    ];
    let a = rng.vec(168);
    let b = rng.vec(168);
    for (a_strides, b_strides) in cases {
        let bc = Broadcast {
            shape,
            a_strides,
            b_strides,
        };
        for op in [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div] {
            let what = format!("{op:?} {bc:?}");
            let mut got = vec![f32::NAN; 168];
            let mut want = vec![f32::NAN; 168];
            (k.binary)(op, &bc, &a, &b, &mut got);
            (PORTABLE.binary)(op, &bc, &a, &b, &mut want);
            assert_same(&got, &want, &what);
            if a_strides == full {
                let mut acc = a.clone();
                (k.binary_inplace)(op, &bc, &mut acc, &b, true);
                assert_same(&acc, &want, &format!("inplace lhs {what}"));
            }
            if b_strides == full {
                let mut acc = b.clone();
                (k.binary_inplace)(op, &bc, &mut acc, &a, false);
                assert_same(&acc, &want, &format!("inplace rhs {what}"));
            }
        }
    }
}

#[test]
fn scale_shift_is_bit_identical_to_portable() {
    let k = neon();
    let mut rng = Rng(23);
    let (batch, channels, spatial) = (2, 3, 13);
    let x = rng.vec(batch * channels * spatial);
    let scale = rng.vec(channels);
    let shift = rng.vec(channels);
    for act in ACTS {
        let mut got = vec![f32::NAN; x.len()];
        let mut want = vec![f32::NAN; x.len()];
        (k.scale_shift)(batch, channels, spatial, &x, &scale, &shift, act, &mut got);
        (PORTABLE.scale_shift)(batch, channels, spatial, &x, &scale, &shift, act, &mut want);
        assert_same(&got, &want, &format!("scale_shift {act:?}"));
        let mut inplace = x.clone();
        let mut want_inplace = x.clone();
        (k.scale_shift_inplace)(batch, channels, spatial, &mut inplace, &scale, &shift, act);
        (PORTABLE.scale_shift_inplace)(
            batch,
            channels,
            spatial,
            &mut want_inplace,
            &scale,
            &shift,
            act,
        );
        assert_same(
            &inplace,
            &want_inplace,
            &format!("scale_shift_inplace {act:?}"),
        );
    }
}
