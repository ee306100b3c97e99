//! Vector `exp`, `tanh` and `sigmoid`, and the activations as lane-wise operations.
//!
//! Algorithm sketch (Cephes `expf`/`tanhf`, single precision, with FMA):
//!
//! * `exp(x)`: clamp `x` to `[-104, 89]` (beyond that the result is `0` or `inf` anyway, and
//!   NaN passes through the clamp), `k = round(x log2 e)`, `r = x - k ln 2` with a two-part
//!   `ln 2` so the reduction is exact, `e^r = 1 + r + r^2 P(r)` with Cephes' degree-5 minimax
//!   `P` (peak relative error about 1.8e-7 on `|r| <= ln 2 / 2`), then multiply by `2^k` as
//!   `2^(k/2) * 2^(k - k/2)` so that both factors are normal numbers: results in the subnormal
//!   range are rounded once, like the scalar reference [`crate::math::expf`], instead of being
//!   flushed, and `2^128` overflows to `inf` instead of wrapping the exponent.
//! * `tanh(x)`: for `|x| < 0.625`, Cephes' odd polynomial `a + a z P(z)` with `z = a^2`, which
//!   keeps full relative accuracy for tiny inputs; otherwise `1 - 2 / (e^(2a) + 1)`. The sign
//!   of `x` is OR-ed back in, so `-0.0` stays `-0.0` and NaN stays NaN.
//! * `sigmoid(x)`: `e = exp(-|x|)` never overflows; the result is `1 / (1 + e)` for `x >= 0`
//!   and `e / (1 + e)` otherwise, one division either way.
//!
//! All three stay within about 3e-7 relative error of the `f64` functions wherever the result
//! is a normal number (the module tests check 1e-6 against `f64` over wide sweeps).
//!
//! The cheap activations reproduce [`Activation::apply`] exactly, NaN handling included,
//! through the operand order of `max`/`min` and explicit compares (see [`Act`]).

use super::vector::Simd;

/// `ln 2` in two parts (Cephes): `k * LN2_HI` is exact for `|k| < 2^15`.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
const LOG2_E: f32 = core::f32::consts::LOG2_E;
/// Cephes `expf` polynomial, highest degree first.
const EXP_P: [f32; 6] = [
    1.987_569_1e-4,
    1.398_199_9e-3,
    8.333_452e-3,
    4.166_579_6e-2,
    1.666_666_6e-1,
    0.5,
];
/// Cephes `tanhf` polynomial for `|x| < 0.625`, highest degree first.
const TANH_P: [f32; 5] = [
    -5.704_988_7e-3,
    2.063_908_8e-2,
    -5.373_971_5e-2,
    1.333_144_2e-1,
    -3.333_328e-1,
];

/// Lane-wise `e^x`; see the module docs.
#[inline(always)]
pub(crate) fn exp<S: Simd>(s: S, x: S::V) -> S::V {
    // `max(lo, x)` returns `x` when `x` is NaN, and so does `min(hi, .)`: NaN survives the
    // clamp and poisons `r`, so the result is NaN.
    let x = s.min(s.splat(89.0), s.max(s.splat(-104.0), x));
    let k = s.round(s.mul(x, s.splat(LOG2_E)));
    let r = s.fmadd(k, s.splat(-LN2_HI), x);
    let r = s.fmadd(k, s.splat(-LN2_LO), r);
    let mut p = s.splat(EXP_P[0]);
    for &c in &EXP_P[1..] {
        p = s.fmadd(p, r, s.splat(c));
    }
    let y = s.add(s.fmadd(p, s.mul(r, r), r), s.splat(1.0));
    // |k| <= 150, so both halves are within the normal exponent range.
    let k1 = s.round(s.mul(k, s.splat(0.5)));
    let k2 = s.sub(k, k1);
    s.mul(s.mul(y, s.pow2(k1)), s.pow2(k2))
}

/// Lane-wise `tanh(x)`; see the module docs.
#[inline(always)]
pub(crate) fn tanh<S: Simd>(s: S, x: S::V) -> S::V {
    let a = s.abs(x);
    let z = s.mul(a, a);
    let mut p = s.splat(TANH_P[0]);
    for &c in &TANH_P[1..] {
        p = s.fmadd(p, z, s.splat(c));
    }
    let small = s.fmadd(s.mul(p, z), a, a);
    let e = exp(s, s.add(a, a));
    let two = s.splat(2.0);
    let large = s.sub(s.splat(1.0), s.div(two, s.add(e, s.splat(1.0))));
    // NaN compares false and takes the `large` path, which propagates it.
    let y = s.select(s.lt(a, s.splat(0.625)), small, large);
    s.or_sign(y, x)
}

/// Lane-wise logistic function; see the module docs.
#[inline(always)]
pub(crate) fn sigmoid<S: Simd>(s: S, x: S::V) -> S::V {
    let one = s.splat(1.0);
    let e = exp(s, s.sub(s.zero(), s.abs(x)));
    let num = s.select(s.lt(x, s.zero()), e, one);
    s.div(num, s.add(one, e))
}

/// An activation specialised for one variant, applied to whole vectors. The kernels are
/// instantiated once per implementor (see [`specialise`]) so that the per-lane `match` of the
/// scalar definition disappears from their loops.
pub(crate) trait Act<S: Simd>: Copy {
    fn apply(self, s: S, v: S::V) -> S::V;
}

/// The identity.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ident;
/// `x < 0 ? 0 : x`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Relu;
/// `x < min ? min : (x > max ? max : x)`, for any bounds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clip<V> {
    pub(crate) min: V,
    pub(crate) max: V,
}
/// [`Clip`] for bounds with `min <= max` (neither NaN), in two instructions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClipOrdered<V> {
    pub(crate) min: V,
    pub(crate) max: V,
}
/// `x < 0 ? alpha x : x`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Leaky<V> {
    pub(crate) alpha: V,
}
/// The logistic function.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sigmoid;
/// The hyperbolic tangent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tanh;

impl<S: Simd> Act<S> for Ident {
    #[inline(always)]
    fn apply(self, _: S, v: S::V) -> S::V {
        v
    }
}
impl<S: Simd> Act<S> for Relu {
    #[inline(always)]
    fn apply(self, s: S, v: S::V) -> S::V {
        // `0 > x ? 0 : x`: NaN and -0.0 come out as themselves, like the scalar `x < 0`.
        s.max(s.zero(), v)
    }
}
impl<S: Simd> Act<S> for Clip<S::V> {
    #[inline(always)]
    fn apply(self, s: S, v: S::V) -> S::V {
        // Two selects rather than min/max so that even a degenerate `min > max` picks the
        // same bound as the scalar definition (which tests `x < min` first).
        let upper = s.select(s.gt(v, self.max), self.max, v);
        s.select(s.lt(v, self.min), self.min, upper)
    }
}
impl<S: Simd> Act<S> for ClipOrdered<S::V> {
    #[inline(always)]
    fn apply(self, s: S, v: S::V) -> S::V {
        // `max(min, x)` is `x < min ? min : x` (NaN stays, as the second operand); then
        // `min(max, t)` is `t > max ? max : t`. With `min <= max` a clamped-up `t = min` is
        // never above `max`, so this is exactly the scalar definition.
        s.min(self.max, s.max(self.min, v))
    }
}
impl<S: Simd> Act<S> for Leaky<S::V> {
    #[inline(always)]
    fn apply(self, s: S, v: S::V) -> S::V {
        s.select(s.lt(v, s.zero()), s.mul(v, self.alpha), v)
    }
}
impl<S: Simd> Act<S> for Sigmoid {
    #[inline(always)]
    fn apply(self, s: S, v: S::V) -> S::V {
        sigmoid(s, v)
    }
}
impl<S: Simd> Act<S> for Tanh {
    #[inline(always)]
    fn apply(self, s: S, v: S::V) -> S::V {
        tanh(s, v)
    }
}

/// Evaluates `$body` with `$a` bound to a value of the [`Act`] type matching `$act`, so the
/// body is compiled once per activation with no `match` inside its loops (the vector
/// counterpart of the portable epilogue's `specialise!`).
macro_rules! specialise {
    ($s:expr, $act:expr, $a:ident => $body:expr) => {{
        use $crate::arch::x86_64::simd::math as m;
        match $act {
            $crate::Activation::Sigmoid => {
                let $a = m::Sigmoid;
                $body
            }
            $crate::Activation::Tanh => {
                let $a = m::Tanh;
                $body
            }
            // The cheap ones; the `then` branch is never taken.
            cheap => m::specialise_cheap!($s, cheap, $a => $body, then unreachable!()),
        }
    }};
}
pub(crate) use specialise;

/// [`specialise!`] for kernels that fuse only the cheap activations (ReLU, clip, leaky
/// ReLU): for sigmoid and tanh, `$body` runs with the identity and then `$after` (a second
/// pass over the output), which saves instantiating a large unrolled body twice more.
macro_rules! specialise_cheap {
    ($s:expr, $act:expr, $a:ident => $body:expr, then $after:expr) => {{
        use $crate::arch::x86_64::simd::math as m;
        let s = $s;
        match $act {
            $crate::Activation::None => {
                let $a = m::Ident;
                $body
            }
            $crate::Activation::Sigmoid | $crate::Activation::Tanh => {
                let $a = m::Ident;
                $body;
                $after
            }
            $crate::Activation::Relu => {
                let $a = m::Relu;
                $body
            }
            $crate::Activation::Clip { min, max } if min <= max => {
                let $a = m::ClipOrdered {
                    min: s.splat(min),
                    max: s.splat(max),
                };
                $body
            }
            $crate::Activation::Clip { min, max } => {
                let $a = m::Clip {
                    min: s.splat(min),
                    max: s.splat(max),
                };
                $body
            }
            $crate::Activation::LeakyRelu { alpha } => {
                let $a = m::Leaky {
                    alpha: s.splat(alpha),
                };
                $body
            }
        }
    }};
}
pub(crate) use specialise_cheap;
