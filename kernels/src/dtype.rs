//! The element types the shape-generic kernels work on: [`Element`] (every tensor dtype kiln
//! has: `f32`, `f64`, `i64`, `i32`, and `u8`, which also stores `bool` as 0/1), [`Num`] (the
//! ones with arithmetic) and [`GatherIndex`] (`i64` and `i32` indices).
//!
//! The traits are sealed: their methods live in the private `sealed` module, so the set of
//! types is closed, and the kernels can rely on exactly these semantics:
//!
//! * **Casts** go through a tiny tagged value (`sealed::Scalar`) and are Rust `as` casts,
//!   which are numpy's `astype` for every pair kiln uses: float to int truncates toward zero
//!   and saturates (NaN becomes 0), int to float rounds to nearest, int to int wraps. After
//!   inlining, the tag of a known source type is a constant and the `match` folds away.
//! * **Integer arithmetic wraps** (two's complement, as ONNX Runtime's C++ does in practice),
//!   and integer division by zero gives 0 instead of trapping, so no input can make a kernel
//!   panic. `i64::MIN / -1` wraps to `i64::MIN`.
//! * **Float sums and products accumulate in `f64`** (the `sealed::Arith::Acc` type), which
//!   keeps a long `f32` reduction accurate without pairwise trees; `f64` accumulates in `f64`
//!   and integers in their own type (wrapping).

/// The private half of the element traits: what the kernels call, unnameable outside the
/// crate.
mod sealed {
    /// One value of any element type, tagged; the pivot of [`Element`](super::Element) casts.
    #[derive(Clone, Copy, Debug)]
    pub enum Scalar {
        F32(f32),
        F64(f64),
        I64(i64),
        I32(i32),
        U8(u8),
    }

    /// Conversion through [`Scalar`]; every element type implements it.
    pub trait Sealed: Copy {
        /// `self` tagged with its type.
        fn to_scalar(self) -> Scalar;
        /// `s` converted with an `as` cast.
        fn from_scalar(s: Scalar) -> Self;
    }

    /// Arithmetic with the crate's conventions (wrapping integers, division by zero is 0).
    pub trait Arith: Copy {
        /// The accumulator of sums and products: `f64` for floats, the type itself for ints.
        type Acc: Copy;
        /// The additive identity of `Acc`.
        const ACC_ZERO: Self::Acc;
        /// The multiplicative identity of `Acc`.
        const ACC_ONE: Self::Acc;
        /// The identity of `max` (`-inf` or the type's minimum).
        const LOWEST: Self;
        /// The identity of `min` (`+inf` or the type's maximum).
        const HIGHEST: Self;
        fn add(self, o: Self) -> Self;
        fn sub(self, o: Self) -> Self;
        fn mul(self, o: Self) -> Self;
        fn div(self, o: Self) -> Self;
        /// Whether `self` is NaN (always false for integers, so the test compiles away).
        fn is_nan(self) -> bool;
        fn widen(self) -> Self::Acc;
        fn acc_add(a: Self::Acc, b: Self::Acc) -> Self::Acc;
        fn acc_mul(a: Self::Acc, b: Self::Acc) -> Self::Acc;
        fn narrow(a: Self::Acc) -> Self;
        /// `sum / n`, rounded once (floats) or truncated (integers); 0 for ints when `n == 0`.
        fn mean(sum: Self::Acc, n: usize) -> Self;
        /// `start + i * delta` (floats computed in `f64` and rounded once; ints wrapping).
        fn range_at(start: Self, delta: Self, i: usize) -> Self;
    }

    /// An index type of [`gather`](crate::gather).
    pub trait Index: Copy {
        fn to_i64(self) -> i64;
    }
}

use sealed::{Arith, Scalar, Sealed};

/// A tensor element type: `f32`, `f64`, `i64`, `i32` or `u8` (which also holds `bool`).
pub trait Element: Sealed + PartialOrd + core::fmt::Debug + 'static {
    /// Zero of the type (`false` for a `bool` stored as `u8`).
    const ZERO: Self;
}

/// An element type with arithmetic: every [`Element`]. (`u8` arithmetic wraps.)
pub trait Num: Element + Arith {}

/// The type of a gather index: `i64` or `i32`.
pub trait GatherIndex: sealed::Index {}

macro_rules! element {
    ($($t:ident => $tag:ident),*) => {$(
        impl Sealed for $t {
            #[inline(always)]
            fn to_scalar(self) -> Scalar {
                Scalar::$tag(self)
            }
            #[inline(always)]
            fn from_scalar(s: Scalar) -> Self {
                match s {
                    Scalar::F32(v) => v as $t,
                    Scalar::F64(v) => v as $t,
                    Scalar::I64(v) => v as $t,
                    Scalar::I32(v) => v as $t,
                    Scalar::U8(v) => v as $t,
                }
            }
        }
        impl Element for $t {
            const ZERO: Self = 0 as $t;
        }
        impl Num for $t {}
    )*};
}

element!(f32 => F32, f64 => F64, i64 => I64, i32 => I32, u8 => U8);

macro_rules! float_arith {
    ($($t:ident),*) => {$(
        impl Arith for $t {
            type Acc = f64;
            const ACC_ZERO: f64 = 0.0;
            const ACC_ONE: f64 = 1.0;
            const LOWEST: Self = $t::NEG_INFINITY;
            const HIGHEST: Self = $t::INFINITY;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)]
            fn div(self, o: Self) -> Self { self / o }
            #[inline(always)]
            #[allow(clippy::eq_op)] // NaN is the one value not equal to itself.
            fn is_nan(self) -> bool { self != self }
            #[inline(always)]
            fn widen(self) -> f64 { self as f64 }
            #[inline(always)]
            fn acc_add(a: f64, b: f64) -> f64 { a + b }
            #[inline(always)]
            fn acc_mul(a: f64, b: f64) -> f64 { a * b }
            #[inline(always)]
            fn narrow(a: f64) -> Self { a as $t }
            #[inline(always)]
            fn mean(sum: f64, n: usize) -> Self { (sum / n as f64) as $t }
            #[inline(always)]
            fn range_at(start: Self, delta: Self, i: usize) -> Self {
                (start as f64 + i as f64 * delta as f64) as $t
            }
        }
    )*};
}

float_arith!(f32, f64);

macro_rules! int_arith {
    ($($t:ident),*) => {$(
        impl Arith for $t {
            type Acc = $t;
            const ACC_ZERO: $t = 0;
            const ACC_ONE: $t = 1;
            const LOWEST: Self = $t::MIN;
            const HIGHEST: Self = $t::MAX;
            #[inline(always)]
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                if o == 0 { 0 } else { self.wrapping_div(o) }
            }
            #[inline(always)]
            fn is_nan(self) -> bool { false }
            #[inline(always)]
            fn widen(self) -> $t { self }
            #[inline(always)]
            fn acc_add(a: $t, b: $t) -> $t { a.wrapping_add(b) }
            #[inline(always)]
            fn acc_mul(a: $t, b: $t) -> $t { a.wrapping_mul(b) }
            #[inline(always)]
            fn narrow(a: $t) -> Self { a }
            #[inline(always)]
            fn mean(sum: $t, n: usize) -> Self {
                // `n` beyond the type's range (only possible for narrow types) leaves a
                // quotient of 0 or -1 rounded toward zero, i.e. 0.
                match <$t>::try_from(n) {
                    Ok(0) | Err(_) => 0,
                    Ok(n) => sum.wrapping_div(n),
                }
            }
            #[inline(always)]
            fn range_at(start: Self, delta: Self, i: usize) -> Self {
                start.wrapping_add(delta.wrapping_mul(i as $t))
            }
        }
    )*};
}

int_arith!(i64, i32, u8);

impl sealed::Index for i64 {
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self
    }
}
impl sealed::Index for i32 {
    #[inline(always)]
    fn to_i64(self) -> i64 {
        self as i64
    }
}
impl GatherIndex for i64 {}
impl GatherIndex for i32 {}

/// `x` converted to `D` with numpy `astype` semantics (see the module doc).
#[inline(always)]
pub(crate) fn cast_one<S: Element, D: Element>(x: S) -> D {
    D::from_scalar(x.to_scalar())
}
