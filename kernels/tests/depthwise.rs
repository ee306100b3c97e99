//! Depthwise convolution: every ISA table this CPU has, through its `conv2d` entry, against the
//! portable kernel on random shapes (3x3 and 5x5 windows the SIMD kernels specialise, other
//! windows, strides and dilations they hand back to the portable code, planes narrower than a
//! vector, planes wide enough for several column groups at 16 lanes, outputs that run into the
//! padding), with random bias, activation and the odd
//! NaN/infinity in the input.
//!
//! Run with `cargo test -p kiln-kernels --features std --test depthwise -- --nocapture` to see
//! which ISAs ran and which were skipped.

use kiln_kernels::{for_isa, Activation, Conv2d, Isa, Kernels, PORTABLE};
use proptest::prelude::*;

/// The table of every non-portable ISA this CPU can run, reporting once which ran, which were
/// skipped, and whether a table's `conv2d` still is the portable kernel (then this harness
/// compares the portable kernel with itself for that ISA).
fn tables() -> Vec<Kernels> {
    static REPORT: std::sync::Once = std::sync::Once::new();
    let mut ran = Vec::new();
    let mut skipped = Vec::new();
    let mut tables = Vec::new();
    for isa in Isa::ALL.into_iter().filter(|&i| i != Isa::Portable) {
        match for_isa(isa) {
            Some(k) => {
                let routed = !std::ptr::fn_addr_eq(k.conv2d, PORTABLE.conv2d);
                ran.push(format!(
                    "{isa}{}",
                    if routed { "" } else { " (conv2d = portable)" }
                ));
                tables.push(k);
            }
            None => skipped.push(isa.name()),
        }
    }
    REPORT.call_once(|| {
        eprintln!("depthwise harness: ran {ran:?} against portable; skipped {skipped:?}");
    });
    tables
}

/// xorshift32: reproducible data from a proptest-chosen seed.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
    /// Uniform in `[-1, 1)`, or with `specials` now and then a NaN, an infinity or a -0.0.
    fn value(&mut self, specials: bool) -> f32 {
        let r = self.next();
        if specials && r.is_multiple_of(29) {
            [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0][(r >> 8) as usize % 4]
        } else {
            (r >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        }
    }
    fn vec(&mut self, n: usize, specials: bool) -> Vec<f32> {
        (0..n).map(|_| self.value(specials)).collect()
    }
}

fn act(i: u8) -> Activation {
    match i % 7 {
        0 => Activation::None,
        1 => Activation::Relu,
        2 => Activation::Clip { min: 0.0, max: 6.0 },
        3 => Activation::Clip {
            min: -0.25,
            max: 0.5,
        },
        4 => Activation::LeakyRelu { alpha: 0.1 },
        5 => Activation::Sigmoid,
        _ => Activation::Tanh,
    }
}

/// `floor((in + pads - dilation * (k - 1) - 1) / stride) + 1`, at least 1.
fn out_len(input: usize, k: usize, stride: usize, dilation: usize, pads: usize) -> usize {
    (input + pads).saturating_sub(dilation * (k - 1) + 1) / stride + 1
}

#[derive(Debug, Clone)]
struct Case {
    p: Conv2d,
    bias: bool,
    act: u8,
    specials: bool,
    seed: u32,
}

fn case() -> impl Strategy<Value = Case> {
    (
        // Mostly narrow planes; now and then one wide enough (with few rows, to stay quick)
        // for several column groups and interior chunks at 16 lanes.
        prop_oneof![
            4 => (1usize..3, 1usize..6, 1usize..30, 1usize..45),
            1 => (1usize..2, 1usize..3, 1usize..7, 45usize..140),
        ],
        // Mostly the specialised windows and strides, sometimes others.
        prop_oneof![4 => Just(3usize), 3 => Just(5usize), 1 => Just(1usize), 1 => Just(7usize)],
        prop_oneof![4 => Just(1usize), 4 => Just(2usize), 1 => Just(3usize)],
        prop_oneof![8 => Just(1usize), 1 => Just(2usize)],
        [0usize..4, 0usize..4, 0usize..4, 0usize..4],
        (0usize..3, 0usize..3),
        (
            any::<bool>(),
            any::<u8>(),
            prop::bool::weighted(0.2),
            any::<u32>(),
        ),
    )
        .prop_map(
            |(
                (batch, c, h, w),
                k,
                stride,
                dilation,
                pad,
                (more_h, more_w),
                (bias, act, specials, seed),
            )| {
                let pad = pad.map(|x| x.min(k - 1));
                let mut p = Conv2d {
                    batch,
                    c_in: c,
                    h,
                    w,
                    c_out: c,
                    kh: k,
                    kw: k,
                    stride: [stride; 2],
                    dilation: [dilation; 2],
                    pad,
                    groups: c,
                    out_h: out_len(h, k, stride, dilation, pad[0] + pad[2]),
                    out_w: out_len(w, k, stride, dilation, pad[1] + pad[3]),
                };
                // Now and then more outputs than the input supports (ceil-style shapes): the
                // extra ones read only padding. (Not for a plain 1x1, which is a GEMM whose
                // output must be the input's size.)
                if seed.is_multiple_of(5) && k > 1 {
                    p.out_h += more_h;
                    p.out_w += more_w;
                }
                Case {
                    p,
                    bias,
                    act,
                    specials,
                    seed: seed | 1,
                }
            },
        )
}

fn check(k: &Kernels, c: &Case) -> Result<(), TestCaseError> {
    let p = &c.p;
    let mut rng = Rng(c.seed);
    let input = rng.vec(p.batch * p.c_in * p.h * p.w, c.specials);
    let weight = rng.vec(p.c_out * p.kh * p.kw, false);
    let bias = rng.vec(p.c_out, false);
    let bias = c.bias.then_some(&bias[..]);
    let act = act(c.act);
    let n_out = p.batch * p.c_out * p.out_h * p.out_w;
    let mut want = vec![0.0; n_out];
    // NaN scratch: stale scratch would poison the result, and an overrun panics.
    let mut scratch = vec![f32::NAN; p.scratch_len()];
    (PORTABLE.conv2d)(p, &input, &weight, bias, act, &mut scratch, &mut want);
    // The portable kernel on absolute values gives, per output, the sum of |terms|: the
    // scale of the rounding error any summation order can make.
    let abs = |v: &[f32]| v.iter().map(|x| x.abs()).collect::<Vec<_>>();
    let mut scale = vec![0.0; n_out];
    let abs_bias = bias.map(abs);
    (PORTABLE.conv2d)(
        p,
        &abs(&input),
        &abs(&weight),
        abs_bias.as_deref(),
        Activation::None,
        &mut scratch,
        &mut scale,
    );
    let mut got = vec![f32::NAN; n_out + 3];
    scratch.fill(f32::NAN);
    (k.conv2d)(p, &input, &weight, bias, act, &mut scratch, &mut got);
    for i in 0..n_out {
        let (g, w) = (got[i], want[i]);
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() {
            g == w
        } else {
            (g - w).abs() <= 1e-5 * (1.0 + scale[i])
        };
        prop_assert!(
            ok,
            "{}: {p:?} {act:?}: output {i}: got {g:e}, want {w:e}",
            k.isa
        );
    }
    prop_assert!(
        got[n_out..].iter().all(|x| x.is_nan()),
        "{}: wrote past the output",
        k.isa
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(200) })]

    #[test]
    fn depthwise_matches_portable(c in case()) {
        for k in tables() {
            check(&k, &c)?;
        }
    }
}

#[test]
fn mobilenet_shapes_match_portable() {
    // The real layers' shapes (channel counts cut down), including the 7x7 plane that is
    // narrower than an AVX-512 vector, the stride-2 layers, and the 28- and 14-wide planes
    // that AVX-512 reads in place (and a 37-wide stride-2 plane, whose column groups at 16
    // lanes overlap).
    for (hw, c, stride) in [
        (112, 2, 1),
        (112, 2, 2),
        (56, 3, 2),
        (37, 2, 2),
        (28, 3, 1),
        (28, 3, 2),
        (14, 4, 1),
        (14, 5, 2),
        (7, 9, 1),
    ] {
        let o = (hw + 2 - 3) / stride + 1;
        let p = Conv2d {
            batch: 1,
            c_in: c,
            h: hw,
            w: hw,
            c_out: c,
            kh: 3,
            kw: 3,
            stride: [stride; 2],
            dilation: [1, 1],
            pad: [1; 4],
            groups: c,
            out_h: o,
            out_w: o,
        };
        let case = Case {
            p,
            bias: true,
            act: 2,
            specials: false,
            seed: 12345,
        };
        for k in tables() {
            check(&k, &case).unwrap();
        }
    }
}
