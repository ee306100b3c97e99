//! Scalar transcendental functions for a `no_std` crate.
//!
//! `core` has no `f32::exp`, `f32::tanh` or `f32::sqrt` on stable Rust (they live in `std`
//! because they call the platform libm), so the activations and the batch-norm folding need
//! their own. These are the *reference* versions: they favour accuracy over speed, and future
//! SIMD paths will be tested against them.
//!
//! Algorithm sketch:
//!
//! * `exp`: evaluate in `f64`. Reduce `x = k ln 2 + r` with `|r| <= ln 2 / 2` using a two-part
//!   (Cody–Waite) `ln 2` so the reduction is exact, sum the Taylor series of `e^r` to degree 13
//!   (truncation error below 1e-17), then scale by `2^k` by building the exponent bits directly.
//!   Rounding the `f64` result to `f32` gives a correctly rounded answer except in astronomically
//!   rare double-rounding cases, far inside the 1e-6 relative error budget.
//! * `tanh(x) = -expm1(-2|x|) / (expm1(-2|x|) + 2)` with the sign restored. `expm1` uses its own
//!   Taylor series for small arguments so that `tanh` keeps full relative accuracy near zero,
//!   where `(e^2x - 1)` would cancel catastrophically.
//! * `sigmoid` uses `e^-|x|` (never overflows) and picks `1/(1+e)` or `e/(1+e)` by sign.
//! * `sqrt`: Newton's iteration in `f64` from a bit-level initial guess, rounded once to `f32`;
//!   that is bit-identical to IEEE `sqrt` (see the argument in [`sqrtf`]).
//! * `ln`: split `x = m 2^e` with `m` in `[√½, √2)`, then `ln m = 2 atanh(s)` with
//!   `s = (m - 1) / (m + 1)`, `|s| <= 0.172`, whose odd series in `s` converges by a factor
//!   `s² < 0.03` per term (13 terms reach 1e-19); `e ln 2` uses the same two-part `ln 2`.
//!   Everything in `f64`, rounded once to `f32`.
//! * `erf`: in `f64`, the Maclaurin series `2/√π Σ (-1)^n x^(2n+1) / (n! (2n+1))` below 2 (at
//!   most ~35 terms; the largest term is ~10, so cancellation costs one digit of `f64`), and
//!   `1 - erfc(x)` above, with `erfc` from its continued fraction
//!   `e^-x² / √π · 1 / (x + ½ / (x + 1 / (x + 3/2 / (x + …))))` evaluated bottom-up to a fixed
//!   depth of 48 (relative error below 1e-15 for `x >= 2`). Past 6, `erf` is ±1 in `f32`. This
//!   is a reference: slower than a rational approximation (musl's `erff`), but accurate to an
//!   `f32` rounding, so SIMD versions can be tested against it.

/// `ln 2` split so that `k * LN2_HI` is exact for the small `k` we use: the high part has its
/// low 21 mantissa bits zero (fdlibm's `ln2_hi`/`ln2_lo`, given as bits to be exact).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const LOG2_E: f64 = core::f64::consts::LOG2_E;

/// Degree of the Taylor polynomials below. With `|r| <= 0.35` the first omitted term of
/// `e^r` is `0.35^14 / 14! < 5e-18`.
const DEGREE: usize = 14;

/// `INV[n] = 1 / n` for `n >= 1`, so the Horner loops multiply instead of divide.
const INV: [f64; DEGREE + 1] = {
    let mut t = [0.0; DEGREE + 1];
    let mut n = 1;
    while n <= DEGREE {
        t[n] = 1.0 / n as f64;
        n += 1;
    }
    t
};

/// Rounds to the nearest integer (halves away from zero). `f64::round` is `std`-only, but a
/// float-to-int `as` cast truncates toward zero and is available in `core`.
#[inline(always)]
fn round_to_i64(x: f64) -> i64 {
    if x >= 0.0 {
        (x + 0.5) as i64
    } else {
        (x - 0.5) as i64
    }
}

/// `2^k` for `-1022 <= k <= 1023`, built from the exponent bits.
#[inline(always)]
fn pow2(k: i64) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// `e^x` in `f64` for `|x| <= 700` (callers clamp far tighter than that).
#[inline(always)]
fn exp_f64(x: f64) -> f64 {
    let k = round_to_i64(x * LOG2_E);
    let kf = k as f64;
    // Cody–Waite: `kf * LN2_HI` is exact because LN2_HI has trailing zero bits, so `r` carries
    // only the rounding error of the small `kf * LN2_LO` term.
    let r = (x - kf * LN2_HI) - kf * LN2_LO;
    // Horner form of sum_{n=0}^{DEGREE-1} r^n / n!: p = 1 + r/1 (1 + r/2 (1 + ... )).
    let mut p = 1.0;
    let mut n = DEGREE - 1;
    while n >= 1 {
        p = 1.0 + r * INV[n] * p;
        n -= 1;
    }
    p * pow2(k)
}

/// `e^y - 1` in `f64` for `-50 <= y <= 50`, accurate relative to the result even for tiny `y`.
#[inline(always)]
fn expm1_f64(y: f64) -> f64 {
    if y > -0.5 && y < 0.5 {
        // y (1 + y/2 (1 + y/3 (1 + ...))): no subtraction, so no cancellation. The first omitted
        // term relative to y is 0.5^14 / 15! < 5e-17.
        let mut p = 1.0;
        let mut n = DEGREE;
        while n >= 2 {
            p = 1.0 + y * INV[n] * p;
            n -= 1;
        }
        y * p
    } else {
        // |e^y - 1| >= 0.39 here, so the subtraction loses at most a couple of bits of f64.
        exp_f64(y) - 1.0
    }
}

/// Copies the sign bit of `sign` onto the non-negative `magnitude`.
#[inline(always)]
fn with_sign_of(magnitude: f32, sign: f32) -> f32 {
    f32::from_bits(magnitude.to_bits() | (sign.to_bits() & 0x8000_0000))
}

/// `e^x` for `f32`, correctly rounded in practice (relative error well below 1e-6 wherever the
/// result is a normal number). Overflows to `+inf` and underflows to `0` like IEEE `exp`.
#[inline]
pub fn expf(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    // e^89 > f32::MAX and e^-104 < half the smallest subnormal, so beyond these the answer is
    // inf / 0; clamping also keeps `k` well inside the range `pow2` can build.
    if x > 89.0 {
        return f32::INFINITY;
    }
    if x < -104.0 {
        return 0.0;
    }
    // The f64 -> f32 cast rounds to nearest, including into the subnormal range and to inf.
    exp_f64(f64::from(x)) as f32
}

/// The logistic function `1 / (1 + e^-x)`.
#[inline]
pub fn sigmoidf(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let t = f64::from(x);
    // e = e^-|x| is in (0, 1], so neither branch can overflow. Beyond |x| = 110 the result is
    // exactly 0 or 1 in f32 anyway, and the clamp keeps exp_f64 in its domain.
    let a = if t < 0.0 { -t } else { t };
    let e = exp_f64(-(if a > 110.0 { 110.0 } else { a }));
    let s = if t >= 0.0 {
        1.0 / (1.0 + e)
    } else {
        e / (1.0 + e)
    };
    s as f32
}

/// The hyperbolic tangent, with full relative accuracy near zero.
#[inline]
pub fn tanhf(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let t = f64::from(x);
    let a = if t < 0.0 { -t } else { t };
    // 1 - tanh(10) < 5e-9, below half an ulp of 1.0f32, so the f32 answer is exactly 1.
    let r = if a > 10.0 {
        1.0
    } else {
        let em = expm1_f64(-2.0 * a);
        -em / (em + 2.0)
    };
    with_sign_of(r as f32, x)
}

/// Square root, bit-identical to IEEE-754 `sqrt` (correctly rounded). Negative inputs give NaN.
#[inline]
pub fn sqrtf(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    // Zeros (keeping the sign of -0.0, as IEEE does) and +inf are their own square roots.
    if x == 0.0 || x == f32::INFINITY {
        return x;
    }
    let xd = f64::from(x);
    // Halving the biased exponent gives a first guess within about 6%; five Newton steps take
    // that to the limit of f64 precision (the error squares each step: 6e-2, 2e-3, 2e-6, 1e-12).
    let mut y = f64::from_bits((xd.to_bits() >> 1) + 0x1ff8_0000_0000_0000);
    for _ in 0..5 {
        y = 0.5 * (y + xd / y);
    }
    // Newton's iteration approaches the root from above and ends within an f64 ulp or two of
    // it. Rounding that to f32 is still correctly rounded: the square root of an f32 is never
    // within 2^-50 (relative) of an f32 rounding midpoint, since a midpoint's square is a
    // 50-bit number that differs from the 24-bit `x` by at least one unit in its last place.
    // (An exhaustive comparison with IEEE sqrt over all 2^31 positive floats found no
    // difference; the unit test samples a million of them.)
    y as f32
}

/// `1 / (2j + 1)` for the `atanh` series of [`ln_f64`].
const ODD_INV: [f64; 13] = {
    let mut t = [0.0; 13];
    let mut j = 0;
    while j < 13 {
        t[j] = 1.0 / (2 * j + 1) as f64;
        j += 1;
    }
    t
};

/// `ln x` for a positive, finite, normal `f64` (every positive `f32` is one).
#[inline]
pub(crate) fn ln_f64(x: f64) -> f64 {
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    // The mantissa with a zero exponent: m in [1, 2).
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > core::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    // m - 1 is exact (Sterbenz), so s carries only the rounding of one add and one divide.
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut p = 0.0;
    let mut j = ODD_INV.len();
    while j > 0 {
        j -= 1;
        p = p * s2 + ODD_INV[j];
    }
    let ef = e as f64;
    ef * LN2_HI + (ef * LN2_LO + 2.0 * s * p)
}

/// `x^y` for `f32`, with C's `powf` on the values models meet: `exp(y ln|x|)` in `f64` (so the
/// `f32` result is rounded once); a negative base needs an integer exponent, whose parity gives
/// the sign (else NaN). `x^0 = 1` and `1^y = 1` even for NaN; zero and infinite bases and
/// exponents follow C's limits (`0^-1 = inf`, `0.5^inf = 0`, `inf^-1 = 0`, `(-1)^±inf = 1`).
pub fn powf(x: f32, y: f32) -> f32 {
    if y == 0.0 || x == 1.0 {
        return 1.0;
    }
    if x.is_nan() || y.is_nan() {
        return f32::NAN;
    }
    let a = x.abs();
    if y.is_infinite() {
        return match (a == 1.0, a < 1.0, y > 0.0) {
            (true, _, _) => 1.0,
            (false, true, true) | (false, false, false) => 0.0,
            _ => f32::INFINITY,
        };
    }
    // Every f32 of magnitude 2^24 or more is an even integer.
    let integer = y.abs() >= 16_777_216.0 || (y as i32) as f32 == y;
    let odd = y.abs() < 16_777_216.0 && integer && (y as i32) % 2 != 0;
    if x < 0.0 && !integer {
        return f32::NAN;
    }
    let r = if a == 0.0 || a.is_infinite() {
        if (y > 0.0) == (a == 0.0) {
            0.0
        } else {
            f32::INFINITY
        }
    } else {
        exp_f64_clamped(f64::from(y) * ln_f64(f64::from(a))) as f32
    };
    if x.is_sign_negative() && odd {
        -r
    } else {
        r
    }
}

/// Natural logarithm for `f32`, correctly rounded in practice: `-inf` at ±0, NaN below zero,
/// `+inf` at `+inf`.
#[inline]
pub fn logf(x: f32) -> f32 {
    if x.is_nan() || x < 0.0 {
        return f32::NAN;
    }
    if x == 0.0 {
        return f32::NEG_INFINITY;
    }
    if x == f32::INFINITY {
        return x;
    }
    ln_f64(f64::from(x)) as f32
}

/// `ln(1 + t)` for `0 <= t <= 1`, with full relative accuracy for tiny `t`.
#[inline]
pub(crate) fn ln1p_f64(t: f64) -> f64 {
    if t < 1e-6 {
        // The next term, t^4 / 4, is below 1e-18 relative to t.
        t * (1.0 - t * (0.5 - t / 3.0))
    } else {
        ln_f64(1.0 + t)
    }
}

/// `e^x` in `f64` for any `x` (clamped into the range [`exp_f64`] handles: beyond ±700 the
/// `f32` callers' results have long saturated).
#[inline]
pub(crate) fn exp_f64_clamped(x: f64) -> f64 {
    exp_f64(x.clamp(-700.0, 700.0))
}

/// `e^x - 1` in `f64` for `x <= 0` (used by ELU/SELU), accurate near zero.
#[inline]
pub(crate) fn expm1_neg_f64(x: f64) -> f64 {
    if x < -50.0 {
        -1.0
    } else {
        expm1_f64(x)
    }
}

/// The threshold between the series and the continued fraction in [`erf_f64`].
const ERF_SPLIT: f64 = 2.0;

/// `erf(x)` for `0 <= x < ERF_SPLIT` by its Maclaurin series.
fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    let mut n = 1.0;
    // The terms fall below 1e-17 of the sum within 35 steps for x < 2.
    while n < 40.0 {
        term *= -x2 / n;
        let t = term / (2.0 * n + 1.0);
        sum += t;
        if t.abs() < 1e-17 * sum.abs() {
            break;
        }
        n += 1.0;
    }
    sum * core::f64::consts::FRAC_2_SQRT_PI
}

/// `erfc(x)` for `x >= ERF_SPLIT` by its continued fraction, depth 48.
fn erfc_fraction(x: f64) -> f64 {
    let mut f = x;
    let mut k = 48.0;
    while k > 0.0 {
        f = x + 0.5 * k / f;
        k -= 1.0;
    }
    // 1/√π = (2/√π) / 2.
    exp_f64_clamped(-x * x) * (0.5 * core::f64::consts::FRAC_2_SQRT_PI) / f
}

/// `erf(x)` in `f64`, accurate to about 1e-15 (relative near 0, absolute elsewhere).
pub(crate) fn erf_f64(x: f64) -> f64 {
    let a = x.abs();
    let r = if a < ERF_SPLIT {
        erf_series(a)
    } else if a < 6.0 {
        1.0 - erfc_fraction(a)
    } else {
        1.0
    };
    if x < 0.0 {
        -r
    } else {
        r
    }
}

/// `erfc(x)` in `f64` for `x >= 0`, with full relative accuracy in the tail.
pub(crate) fn erfc_pos_f64(x: f64) -> f64 {
    if x < ERF_SPLIT {
        1.0 - erf_series(x)
    } else {
        erfc_fraction(x)
    }
}

/// The error function for `f32`, within an `f32` rounding of the true value (the `f64`
/// evaluation is good to about 1e-15). `erf(±inf) = ±1`, NaN stays NaN.
#[inline]
pub fn erff(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let r = erf_f64(f64::from(x)) as f32;
    // Keep the sign of -0.0 (the series returns x itself for tiny x, so it already does).
    if x == 0.0 {
        x
    } else {
        r
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::testutil::XorShift;

    /// Relative error of `got` against the f64 reference `want`.
    fn rel_err(got: f32, want: f64) -> f64 {
        if want == 0.0 {
            f64::from(got).abs()
        } else {
            ((f64::from(got) - want) / want).abs()
        }
    }

    /// Sweeps `[lo, hi]` on a fine grid plus random points.
    fn sweep(lo: f32, hi: f32, mut check: impl FnMut(f32)) {
        let steps = 200_000;
        for i in 0..=steps {
            check(lo + (hi - lo) * (i as f32 / steps as f32));
        }
        let mut rng = XorShift::new(7);
        for _ in 0..200_000 {
            check(rng.uniform(lo, hi));
        }
    }

    #[test]
    fn expf_matches_f64_reference_over_f32_range() {
        let mut worst = 0.0f64;
        // Results are normal f32 for x in about [-87.3, 88.7].
        sweep(-87.3, 88.72, |x| {
            let want = f64::from(x).exp();
            let e = rel_err(expf(x), want);
            assert!(e <= 1e-6, "expf({x}) = {} want {want} rel {e}", expf(x));
            worst = worst.max(e);
        });
        // Being correctly rounded in practice is much stronger than the 1e-6 budget.
        assert!(worst < 1.2e-7, "worst relative error {worst}");
    }

    #[test]
    fn expf_subnormal_and_saturated_results() {
        // In the subnormal range the best possible answer is the f64 value rounded to f32.
        sweep(-104.5, -87.3, |x| {
            let want = f64::from(x).exp() as f32;
            assert_eq!(expf(x).to_bits(), want.to_bits(), "expf({x})");
        });
        assert_eq!(expf(88.8), f32::INFINITY);
        assert_eq!(expf(1e30), f32::INFINITY);
        assert_eq!(expf(f32::INFINITY), f32::INFINITY);
        assert_eq!(expf(-1e30), 0.0);
        assert_eq!(expf(f32::NEG_INFINITY), 0.0);
        assert!(expf(f32::NAN).is_nan());
        assert_eq!(expf(0.0), 1.0);
        assert_eq!(expf(-0.0), 1.0);
        assert_eq!(expf(1.0), core::f32::consts::E);
    }

    #[test]
    fn sigmoidf_matches_f64_reference() {
        sweep(-87.0, 30.0, |x| {
            let xd = f64::from(x);
            let want = 1.0 / (1.0 + (-xd).exp());
            let e = rel_err(sigmoidf(x), want);
            assert!(e <= 1e-6, "sigmoidf({x}) = {} want {want}", sigmoidf(x));
        });
        assert_eq!(sigmoidf(0.0), 0.5);
        assert_eq!(sigmoidf(200.0), 1.0);
        assert_eq!(sigmoidf(f32::INFINITY), 1.0);
        assert_eq!(sigmoidf(-200.0), 0.0);
        assert_eq!(sigmoidf(f32::NEG_INFINITY), 0.0);
        assert!(sigmoidf(f32::NAN).is_nan());
    }

    #[test]
    fn tanhf_matches_f64_reference_including_tiny_inputs() {
        sweep(-12.0, 12.0, |x| {
            let want = f64::from(x).tanh();
            let e = rel_err(tanhf(x), want);
            assert!(e <= 1e-6, "tanhf({x}) = {} want {want}", tanhf(x));
        });
        // Near zero tanh(x) ~ x: a naive (e^2x - 1)/(e^2x + 1) fails this badly.
        let mut rng = XorShift::new(11);
        for _ in 0..100_000 {
            let x = rng.uniform(-1.0, 1.0) * 10f32.powi(-(rng.below(38) as i32));
            let want = f64::from(x).tanh();
            let e = rel_err(tanhf(x), want);
            assert!(e <= 1e-6, "tanhf({x}) = {} want {want}", tanhf(x));
        }
        assert_eq!(tanhf(50.0), 1.0);
        assert_eq!(tanhf(-50.0), -1.0);
        assert_eq!(tanhf(f32::INFINITY), 1.0);
        assert_eq!(tanhf(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanhf(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(tanhf(-0.0).to_bits(), (-0.0f32).to_bits());
        assert!(tanhf(f32::NAN).is_nan());
    }

    #[test]
    fn logf_matches_std_within_an_ulp() {
        let mut rng = XorShift::new(5);
        for _ in 0..1_000_000 {
            // Random bit patterns of positive finite floats, subnormals included.
            let x = f32::from_bits(rng.next_u32() % 0x7f80_0000);
            if x == 0.0 {
                continue;
            }
            let want = f64::from(x).ln();
            let got = f64::from(logf(x));
            // Correctly rounded means within half an ulp of the f64 value; allow one ulp.
            let ulp =
                f64::from(f32::from_bits((want as f32).abs().to_bits() + 1) - (want as f32).abs());
            assert!(
                (got - want).abs() <= ulp.max(f64::from(f32::MIN_POSITIVE)),
                "logf({x:e}) = {got} want {want}"
            );
        }
        sweep(0.5, 2.0, |x| {
            let want = f64::from(x).ln();
            let e = (f64::from(logf(x)) - want).abs();
            assert!(
                e <= 6e-8 * want.abs().max(1e-30) + 1e-45,
                "logf({x}) = {} want {want}",
                logf(x)
            );
        });
        assert_eq!(logf(1.0), 0.0);
        // ln(e as f32) = 1 - 3.04e-8 rounds down to 1 - 2^-24 (std's logf says 1.0).
        assert_eq!(logf(core::f32::consts::E), 1.0 - f32::EPSILON / 2.0);
        assert_eq!(logf(0.0), f32::NEG_INFINITY);
        assert_eq!(logf(-0.0), f32::NEG_INFINITY);
        assert_eq!(logf(f32::INFINITY), f32::INFINITY);
        assert!(logf(-1.0).is_nan());
        assert!(logf(f32::NAN).is_nan());
        assert!(logf(f32::NEG_INFINITY).is_nan());
        assert_eq!(logf(f32::MAX), f64::from(f32::MAX).ln() as f32);
        assert_eq!(logf(1e-45), f64::from(1e-45f32).ln() as f32);
    }

    /// `erf` independently: Simpson's rule on `2/√π e^(-t²)` over `[0, x]` with many panels
    /// (error below 1e-11 up to x = 7), in f64.
    fn erf_reference(x: f64) -> f64 {
        let n = 4000;
        let h = x / n as f64;
        let f = |t: f64| (-t * t).exp();
        let mut s = f(0.0) + f(x);
        for i in 1..n {
            s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        s * h / 3.0 * core::f64::consts::FRAC_2_SQRT_PI
    }

    #[test]
    fn erff_matches_a_quadrature_reference() {
        let mut rng = XorShift::new(9);
        for i in 0..20_000 {
            let x = if i < 10_000 {
                rng.uniform(-7.0, 7.0)
            } else {
                rng.uniform(-1.0, 1.0) * 10f32.powi(-(rng.below(30) as i32))
            };
            let want = erf_reference(f64::from(x));
            let got = f64::from(erff(x));
            // Absolute 1e-7 everywhere, and relative 1.2e-7 (about an ulp) near zero.
            assert!(
                (got - want).abs() <= 1e-7f64.min(1.2e-7 * want.abs()).max(6e-8 * want.abs()),
                "erff({x:e}) = {got:e} want {want:e}"
            );
        }
        // Also the f64 kernel itself, on both sides of the series / fraction split.
        for i in 0..=600 {
            let x = i as f64 * 0.01;
            let want = erf_reference(x);
            assert!((erf_f64(x) - want).abs() < 1e-11, "erf_f64({x})");
            assert!(
                (erfc_pos_f64(x) - (1.0 - want)).abs() < 1e-11,
                "erfc_pos_f64({x})"
            );
        }
        assert_eq!(erff(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(erff(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(erff(f32::INFINITY), 1.0);
        assert_eq!(erff(f32::NEG_INFINITY), -1.0);
        assert_eq!(erff(10.0), 1.0);
        assert!(erff(f32::NAN).is_nan());
    }

    #[test]
    fn sqrtf_is_bit_identical_to_std() {
        let mut rng = XorShift::new(3);
        for _ in 0..1_000_000 {
            // Random bit patterns of positive finite floats, subnormals included.
            let x = f32::from_bits(rng.next_u32() % 0x7f80_0000);
            assert_eq!(sqrtf(x).to_bits(), x.sqrt().to_bits(), "sqrtf({x:e})");
        }
        for i in 0..100_000u32 {
            let x = i as f32 * 0.01;
            assert_eq!(sqrtf(x).to_bits(), x.sqrt().to_bits(), "sqrtf({x})");
        }
        for x in [
            f32::MIN_POSITIVE,
            f32::MAX,
            1.0,
            4.0,
            2.0,
            1e-45,
            f32::EPSILON,
        ] {
            assert_eq!(sqrtf(x).to_bits(), x.sqrt().to_bits(), "sqrtf({x:e})");
        }
        assert_eq!(sqrtf(9.0), 3.0);
        assert_eq!(sqrtf(f32::INFINITY), f32::INFINITY);
        assert_eq!(sqrtf(-0.0).to_bits(), (-0.0f32).to_bits());
        assert!(sqrtf(-1.0).is_nan());
        assert!(sqrtf(f32::NAN).is_nan());
        assert!(sqrtf(f32::NEG_INFINITY).is_nan());
    }
}
