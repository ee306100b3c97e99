//! Pooling: every ISA table this CPU has against the portable kernels, on random windows,
//! strides (the vectorised 1 and 2 and the others, which fall back), paddings, ceil-mode
//! output sizes and both average-pool divisors, with NaN and infinities mixed in.
//!
//! Max and average pooling must be bit-identical to the portable kernels (each lane folds its
//! window in the same order); global average pooling sums in another order and must agree to
//! 1e-5 of the plane's scale.
//!
//! Run with `cargo test -p kiln-kernels --features std --test pool -- --nocapture` to see which
//! ISAs ran and which were skipped.

mod common;

use kiln_kernels::{Pool2d, PORTABLE};
use proptest::prelude::*;

/// xorshift32: reproducible data from a proptest-chosen seed.
struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
    /// Uniform in `[-1, 1)`, with (`specials`) now and then a NaN, an infinity or a -0.0.
    fn vec(&mut self, n: usize, specials: bool) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let r = self.next();
                if specials && r.is_multiple_of(41) {
                    [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0][(r >> 8) as usize % 4]
                } else {
                    (r >> 8) as f32 / (1u32 << 23) as f32 - 1.0
                }
            })
            .collect()
    }
    /// Uniform in `[-1, 1)` rounded to eighths (so windows tie), a fifth of them ±0.0 or
    /// ±infinity, and no NaN: what the 3x3 stride-2 max pool runs itself rather than handing
    /// to the portable kernel, with the ties that decide which of +0.0 and -0.0 it keeps.
    fn ties(&mut self, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let r = self.next();
                match r % 20 {
                    0 => 0.0,
                    1 => -0.0,
                    2 => f32::INFINITY,
                    3 => f32::NEG_INFINITY,
                    _ => ((r >> 8) % 16) as f32 / 8.0 - 1.0,
                }
            })
            .collect()
    }
}

/// Bit-identical, any NaN matching any NaN.
fn same(got: &[f32], want: &[f32]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err("length".into());
    }
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if !(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan())) {
            return Err(format!("element {i}: got {g:e}, want {w:e}"));
        }
    }
    Ok(())
}

fn out_len(input: usize, k: usize, stride: usize, pads: usize, ceil: bool) -> usize {
    let span = (input + pads).saturating_sub(k);
    (if ceil {
        span.div_ceil(stride)
    } else {
        span / stride
    }) + 1
}

fn pool() -> impl Strategy<Value = (Pool2d, bool, u32)> {
    (
        (1usize..3, 1usize..4, 1usize..24, 1usize..70),
        (1usize..6, 1usize..6),
        (
            prop_oneof![3 => 1usize..3, 1 => 3usize..5],
            prop_oneof![3 => 1usize..3, 1 => 3usize..5],
        ),
        [0usize..3, 0usize..3, 0usize..3, 0usize..3],
        (
            any::<bool>(),
            any::<bool>(),
            prop::bool::weighted(0.3),
            any::<u32>(),
        ),
    )
        .prop_map(
            |(
                (batch, channels, h, w),
                (kh, kw),
                (sh, sw),
                pad,
                (ceil, include, specials, seed),
            )| {
                // Padding smaller than the window, and a window no larger than the padded input.
                let pad = [
                    pad[0].min(kh - 1),
                    pad[1].min(kw - 1),
                    pad[2].min(kh - 1),
                    pad[3].min(kw - 1),
                ];
                let kh = kh.min(h + pad[0] + pad[2]);
                let kw = kw.min(w + pad[1] + pad[3]);
                let p = Pool2d {
                    batch,
                    channels,
                    h,
                    w,
                    kh,
                    kw,
                    stride: [sh, sw],
                    pad,
                    out_h: out_len(h, kh, sh, pad[0] + pad[2], ceil),
                    out_w: out_len(w, kw, sw, pad[1] + pad[3], ceil),
                    count_include_pad: include,
                };
                (p, specials, seed | 1)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(300) })]

    #[test]
    fn max_and_avg_pool_match_portable((p, specials, seed) in pool()) {
        let x = Rng(seed).vec(p.batch * p.channels * p.h * p.w, specials);
        let n = p.batch * p.channels * p.out_h * p.out_w;
        let mut want_max = vec![0.0; n];
        (PORTABLE.max_pool2d)(&p, &x, &mut want_max);
        let mut want_avg = vec![0.0; n];
        (PORTABLE.avg_pool2d)(&p, &x, &mut want_avg);
        for k in common::isas("pool") {
            let mut got = vec![f32::NAN; n];
            (k.max_pool2d)(&p, &x, &mut got);
            let r = same(&got, &want_max);
            prop_assert!(r.is_ok(), "{} max {p:?}: {r:?}", k.isa);
            got.fill(f32::NAN);
            (k.avg_pool2d)(&p, &x, &mut got);
            let r = same(&got, &want_avg);
            prop_assert!(r.is_ok(), "{} avg {p:?}: {r:?}", k.isa);
        }
    }

    /// 3x3 stride-2 max pools (`simd/pool_3x3s2.rs` on x86), on the sizes and paddings the
    /// networks use and around them, ceil mode or not; now and then a plane with a NaN.
    #[test]
    fn max_pool_3x3_stride_2_matches_portable(
        planes in (1usize..3, 1usize..5),
        (h, w) in (1usize..40, 1usize..140),
        pad in [0usize..3, 0usize..3, 0usize..3, 0usize..3],
        ceil in any::<bool>(),
        nan in prop::bool::weighted(0.2),
        seed in any::<u32>(),
    ) {
        let (batch, channels) = planes;
        let pad = pad.map(|q| q.min(2));
        // A window no larger than the padded input.
        let (h, w) = (h.max(3usize.saturating_sub(pad[0] + pad[2])), w.max(3usize.saturating_sub(pad[1] + pad[3])));
        let p = Pool2d {
            batch,
            channels,
            h,
            w,
            kh: 3,
            kw: 3,
            stride: [2, 2],
            pad,
            out_h: out_len(h, 3, 2, pad[0] + pad[2], ceil),
            out_w: out_len(w, 3, 2, pad[1] + pad[3], ceil),
            count_include_pad: false,
        };
        let mut rng = Rng(seed | 1);
        let mut x = rng.ties(batch * channels * h * w);
        if nan {
            let at = rng.next() as usize % x.len();
            x[at] = f32::NAN;
        }
        let n = batch * channels * p.out_h * p.out_w;
        let mut want = vec![0.0; n];
        (PORTABLE.max_pool2d)(&p, &x, &mut want);
        for k in common::isas("pool") {
            let mut got = vec![f32::NAN; n];
            (k.max_pool2d)(&p, &x, &mut got);
            let r = same(&got, &want);
            prop_assert!(r.is_ok(), "{} max {p:?}: {r:?}", k.isa);
        }
    }

    #[test]
    fn global_avg_pool_matches_portable(
        batch in 1usize..3,
        channels in 1usize..5,
        spatial in prop_oneof![0usize..70, Just(196usize), Just(3136usize)],
        specials in prop::bool::weighted(0.1),
        seed in any::<u32>(),
    ) {
        let x = Rng(seed | 1).vec(batch * channels * spatial, specials);
        let mut want = vec![0.0; batch * channels];
        (PORTABLE.global_avg_pool)(batch, channels, spatial, &x, &mut want);
        for k in common::isas("pool") {
            let mut got = vec![f32::NAN; batch * channels];
            (k.global_avg_pool)(batch, channels, spatial, &x, &mut got);
            for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
                // Inputs are in [-1, 1], so the mean's rounding error is on the order of
                // 1e-7 whatever the summation order.
                let ok = if w.is_nan() { g.is_nan() } else if w.is_infinite() { g == w } else { (g - w).abs() <= 1e-5 };
                prop_assert!(ok, "{} global_avg_pool [{batch}, {channels}, {spatial}] plane {i}: got {g:e}, want {w:e}", k.isa);
            }
        }
    }
}

/// The networks' pooling layers, whole: `[h, w, k, stride, pad, out]` (square).
const NETWORK_POOLS: [(usize, usize, usize, [usize; 4], usize); 6] = [
    // ResNet's stem: 3x3, stride 2, padding 1 on 112x112.
    (112, 3, 2, [1; 4], 56),
    // SqueezeNet's three: the 109-wide one's last vector ends one float before the row's end
    // (the odd window's unused last float: a masked load), then ceil-mode padding, then 27.
    (109, 3, 2, [0; 4], 54),
    (54, 3, 2, [0, 0, 1, 1], 27),
    (27, 3, 2, [0; 4], 13),
    // Inception's 3x3 stride-1 pools on 28x28 and 14x14 (padded rows, every column a vector).
    (28, 3, 1, [1; 4], 28),
    (14, 3, 1, [1; 4], 14),
];

#[test]
fn network_pools_match_portable() {
    for (hw, k, stride, pad, out) in NETWORK_POOLS {
        for include in [false, true] {
            let p = Pool2d {
                batch: 1,
                channels: 3,
                h: hw,
                w: hw,
                kh: k,
                kw: k,
                stride: [stride; 2],
                pad,
                out_h: out,
                out_w: out,
                count_include_pad: include,
            };
            // NaN, infinities and -0.0 mixed in: the last plane's last row included.
            let x = Rng(7).vec(3 * hw * hw, true);
            let n = 3 * out * out;
            let (mut want_max, mut want_avg) = (vec![0.0; n], vec![0.0; n]);
            (PORTABLE.max_pool2d)(&p, &x, &mut want_max);
            (PORTABLE.avg_pool2d)(&p, &x, &mut want_avg);
            for k in common::isas("pool") {
                let mut got = vec![f32::NAN; n];
                (k.max_pool2d)(&p, &x, &mut got);
                same(&got, &want_max).unwrap_or_else(|e| panic!("{} max {p:?}: {e}", k.isa));
                got.fill(f32::NAN);
                (k.avg_pool2d)(&p, &x, &mut got);
                same(&got, &want_avg).unwrap_or_else(|e| panic!("{} avg {p:?}: {e}", k.isa));
            }
        }
    }
}
