//! Reductions, log-softmax, element-wise math and the rank-N broadcasting binaries against
//! naive references: every reduction indexes the `[outer, len, inner]` view element by element
//! and sums in `f64` (or exact wrapping integers); every broadcast output unravels its flat
//! index and clamps it into each operand's own (left-padded) shape.
//!
//! Dtypes: `f32`, `f64`, `i64`, `i32` for reductions and arithmetic, `u8` as well for the
//! comparisons and `where`; NaN in the float data for max/min and comparisons.

use kiln_kernels::{
    binary_nd, compare_nd, log_softmax, log_softmax_inplace, pow_nd, reduce, unary_math,
    unary_math_inplace, where_nd, BinaryNd, BinaryOp, CompareOp, Reduce, UnaryMath, WhereNd,
};
use proptest::prelude::*;

mod common;
use common::Rng;

const KINDS: [Reduce; 5] = [
    Reduce::Sum,
    Reduce::Mean,
    Reduce::Max,
    Reduce::Min,
    Reduce::Prod,
];

/// The reduction of `vals` in f64 (floats), NaN propagating for max/min.
fn naive_reduce_f64(kind: Reduce, vals: &[f64]) -> f64 {
    match kind {
        Reduce::Sum => vals.iter().sum(),
        Reduce::Mean => vals.iter().sum::<f64>() / vals.len() as f64,
        Reduce::Prod => vals.iter().product(),
        Reduce::Max => {
            if vals.iter().any(|v| v.is_nan()) {
                f64::NAN
            } else {
                vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
            }
        }
        Reduce::Min => {
            if vals.iter().any(|v| v.is_nan()) {
                f64::NAN
            } else {
                vals.iter().cloned().fold(f64::INFINITY, f64::min)
            }
        }
    }
}

/// The values of reduction `(o, i)` of the `[outer, len, inner]` view.
fn column<T: Copy>(x: &[T], len: usize, inner: usize, o: usize, i: usize) -> Vec<T> {
    (0..len).map(|l| x[(o * len + l) * inner + i]).collect()
}

/// `got` within `rel` of `want` relative to `max(|want|, 1)`; NaN matches NaN, infinities
/// exactly.
fn close(got: f64, want: f64, rel: f64) -> bool {
    if want.is_nan() {
        got.is_nan()
    } else if want.is_infinite() {
        got == want
    } else {
        (got - want).abs() <= rel * want.abs().max(1.0)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(200) })]

    #[test]
    fn float_reductions_match_naive(
        outer in 0usize..4,
        len in 0usize..40,
        inner in prop_oneof![Just(1usize), 1usize..5, 60usize..140],
        seed in any::<u32>(),
        nan in prop::bool::weighted(0.2),
    ) {
        let mut rng = Rng::new(seed);
        let n = outer * len * inner;
        // Values near 1 keep products of 40 terms in range.
        let mut x64: Vec<f64> = (0..n).map(|_| rng.uniform(0.5, 1.5) * if rng.below(2) == 0 { 1.0 } else { -1.0 }).collect();
        if nan && n > 0 {
            let at = rng.below(n);
            x64[at] = f64::NAN;
        }
        let x32: Vec<f32> = x64.iter().map(|&v| v as f32).collect();
        for kind in KINDS {
            let mut y32 = vec![-7.0f32; outer * inner];
            reduce(kind, outer, len, inner, &x32, &mut y32);
            let mut y64 = vec![-7.0f64; outer * inner];
            reduce(kind, outer, len, inner, &x64, &mut y64);
            for o in 0..outer {
                for i in 0..inner {
                    let c32: Vec<f64> = column(&x32, len, inner, o, i).iter().map(|&v| f64::from(v)).collect();
                    let want32 = naive_reduce_f64(kind, &c32);
                    let got = f64::from(y32[o * inner + i]);
                    prop_assert!(close(got, f64::from(want32 as f32), 1e-6), "f32 {kind:?} [{o}, {i}] of [{outer}, {len}, {inner}]: got {got} want {want32}");
                    let want64 = naive_reduce_f64(kind, &column(&x64, len, inner, o, i));
                    prop_assert!(close(y64[o * inner + i], want64, 1e-12), "f64 {kind:?} [{o}, {i}]: got {} want {want64}", y64[o * inner + i]);
                }
            }
        }
    }

    #[test]
    fn integer_reductions_match_naive(
        outer in 0usize..4,
        len in 0usize..30,
        inner in prop_oneof![Just(1usize), 1usize..5, 60usize..140],
        seed in any::<u32>(),
    ) {
        let mut rng = Rng::new(seed);
        let n = outer * len * inner;
        // Large values, so that i32 sums and products wrap.
        let x64: Vec<i64> = (0..n).map(|_| rng.next() as i32 as i64 * if rng.below(3) == 0 { 1 << 20 } else { 1 }).collect();
        let x32: Vec<i32> = (0..n).map(|_| (rng.next() as i32) >> rng.below(31)).collect();
        for kind in KINDS {
            let mut y64 = vec![-7i64; outer * inner];
            reduce(kind, outer, len, inner, &x64, &mut y64);
            let mut y32 = vec![-7i32; outer * inner];
            reduce(kind, outer, len, inner, &x32, &mut y32);
            for o in 0..outer {
                for i in 0..inner {
                    let c = column(&x64, len, inner, o, i);
                    let want = match kind {
                        Reduce::Sum => c.iter().fold(0i64, |a, &v| a.wrapping_add(v)),
                        Reduce::Mean => if len == 0 { 0 } else { c.iter().fold(0i64, |a, &v| a.wrapping_add(v)) / len as i64 },
                        Reduce::Prod => c.iter().fold(1i64, |a, &v| a.wrapping_mul(v)),
                        Reduce::Max => c.iter().cloned().max().unwrap_or(i64::MIN),
                        Reduce::Min => c.iter().cloned().min().unwrap_or(i64::MAX),
                    };
                    prop_assert_eq!(y64[o * inner + i], want, "i64 {:?}", kind);
                    let c = column(&x32, len, inner, o, i);
                    let want = match kind {
                        Reduce::Sum => c.iter().fold(0i32, |a, &v| a.wrapping_add(v)),
                        Reduce::Mean => if len == 0 { 0 } else { c.iter().fold(0i32, |a, &v| a.wrapping_add(v)) / len as i32 },
                        Reduce::Prod => c.iter().fold(1i32, |a, &v| a.wrapping_mul(v)),
                        Reduce::Max => c.iter().cloned().max().unwrap_or(i32::MIN),
                        Reduce::Min => c.iter().cloned().min().unwrap_or(i32::MAX),
                    };
                    prop_assert_eq!(y32[o * inner + i], want, "i32 {:?}", kind);
                }
            }
        }
    }

    #[test]
    fn log_softmax_matches_naive(
        outer in 1usize..4,
        len in 1usize..30,
        inner in prop_oneof![Just(1usize), 1usize..5, 60usize..140],
        seed in any::<u32>(),
        offset in prop_oneof![Just(0.0f64), Just(1000.0), Just(-1000.0)],
    ) {
        let mut rng = Rng::new(seed);
        let n = outer * len * inner;
        // Large common offsets: the naive f64 form would overflow at +1000 without the max
        // shift, which the reference therefore applies in f64.
        let x: Vec<f32> = (0..n).map(|_| (offset + rng.uniform(-20.0, 20.0)) as f32).collect();
        let mut y = vec![f32::NAN; n];
        log_softmax(outer, len, inner, &x, &mut y);
        let mut d = x.clone();
        log_softmax_inplace(outer, len, inner, &mut d);
        for o in 0..outer {
            for i in 0..inner {
                let c: Vec<f64> = column(&x, len, inner, o, i).iter().map(|&v| f64::from(v)).collect();
                let m = c.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let lse = m + c.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                for (l, &v) in c.iter().enumerate() {
                    let at = (o * len + l) * inner + i;
                    let want = v - lse;
                    // Error relative to the logits' scale: x - max is exact-ish, ln(sum) to an ulp.
                    let tol = 2e-6 * want.abs().max(1.0);
                    prop_assert!((f64::from(y[at]) - want).abs() <= tol, "[{o}, {l}, {i}] got {} want {want}", y[at]);
                    prop_assert_eq!(y[at].to_bits(), d[at].to_bits());
                }
            }
        }
    }

    /// `pow_nd` against the standard library's `powf` computed in `f64` (an independent
    /// implementation): integer exponents on negative bases, zeros, broadcasting.
    #[test]
    fn pow_nd_matches_std(
        out in prop::collection::vec(prop_oneof![4 => 1usize..5, 1 => Just(0usize), 1 => 5usize..40], 0..=6),
        picks in (any::<u8>(), any::<u8>(), 0usize..7, 0usize..7),
        seed in any::<u32>(),
    ) {
        let (a_shape, sa) = operand(&out, picks.0, picks.2);
        let (b_shape, sb) = operand(&out, picks.1, picks.3);
        let p = BinaryNd { out: &out, a_strides: &sa, b_strides: &sb };
        let mut rng = Rng::new(seed);
        let total: usize = out.iter().product();
        let na: usize = a_shape.iter().product();
        let nb: usize = b_shape.iter().product();
        let a: Vec<f32> = (0..na).map(|_| if rng.below(9) == 0 { 0.0 } else { rng.uniform(-3.0, 3.0) as f32 }).collect();
        let b: Vec<f32> = (0..nb).map(|_| if rng.below(2) == 0 { rng.below(9) as f32 - 4.0 } else { rng.uniform(-3.0, 3.0) as f32 }).collect();
        let mut y = vec![f32::NAN; total];
        pow_nd(&p, &a, &b, &mut y);
        for (flat, &g) in y.iter().enumerate() {
            let o = unravel(flat, &out);
            let (u, v) = (a[naive_index(&o, &out, &a_shape)], b[naive_index(&o, &out, &b_shape)]);
            let w = f64::from(u).powf(f64::from(v)) as f32;
            let ok = (g.is_nan() && w.is_nan()) || g == w || (f64::from(g) - f64::from(w)).abs() <= 2e-7 * f64::from(w.abs());
            prop_assert!(ok, "{u}^{v} at {o:?}: {g} vs {w}");
        }
    }

    #[test]
    fn binary_nd_matches_naive(
        out in prop::collection::vec(prop_oneof![4 => 1usize..5, 1 => Just(0usize), 1 => 5usize..40], 0..=6),
        picks in (any::<u8>(), any::<u8>(), 0usize..7, 0usize..7),
        op in 0u8..4,
        seed in any::<u32>(),
    ) {
        let op = [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div][op as usize];
        let (a_shape, sa) = operand(&out, picks.0, picks.2);
        let (b_shape, sb) = operand(&out, picks.1, picks.3);
        let p = BinaryNd { out: &out, a_strides: &sa, b_strides: &sb };
        let mut rng = Rng::new(seed);
        let total: usize = out.iter().product();
        let na: usize = a_shape.iter().product();
        let nb: usize = b_shape.iter().product();
        let src = |o: &[usize], shape: &[usize]| naive_index(o, &out, shape);
        // f32: bit-identical to the scalar operation.
        let a: Vec<f32> = (0..na).map(|_| rng.uniform(-3.0, 3.0) as f32).collect();
        let b: Vec<f32> = (0..nb).map(|_| if rng.below(9) == 0 { 0.0 } else { rng.uniform(-3.0, 3.0) as f32 }).collect();
        let mut y = vec![f32::NAN; total];
        binary_nd(op, &p, &a, &b, &mut y);
        for (flat, &g) in y.iter().enumerate() {
            let o = unravel(flat, &out);
            let (u, v) = (a[src(&o, &a_shape)], b[src(&o, &b_shape)]);
            let w = match op { BinaryOp::Add => u + v, BinaryOp::Sub => u - v, BinaryOp::Mul => u * v, BinaryOp::Div => u / v };
            prop_assert!(g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()), "f32 {op:?} at {o:?}: {g} vs {w}");
        }
        // i64 / i32: wrapping, truncating division, x / 0 = 0.
        let a: Vec<i64> = (0..na).map(|_| rng.next() as i32 as i64 * 4_000_000_000).collect();
        let b: Vec<i64> = (0..nb).map(|_| rng.below(7) as i64 - 3).collect();
        let mut y = vec![-1i64; total];
        binary_nd(op, &p, &a, &b, &mut y);
        for (flat, &g) in y.iter().enumerate() {
            let o = unravel(flat, &out);
            let (u, v) = (a[src(&o, &a_shape)], b[src(&o, &b_shape)]);
            let w = match op { BinaryOp::Add => u.wrapping_add(v), BinaryOp::Sub => u.wrapping_sub(v), BinaryOp::Mul => u.wrapping_mul(v), BinaryOp::Div => u.checked_div(v).unwrap_or(0) };
            prop_assert_eq!(g, w, "i64 {:?}", op);
        }
        let a: Vec<i32> = (0..na).map(|_| rng.next() as i32).collect();
        let b: Vec<i32> = (0..nb).map(|_| if rng.below(5) == 0 { -1 } else { rng.next() as i32 >> 16 }).collect();
        let mut y = vec![-1i32; total];
        binary_nd(op, &p, &a, &b, &mut y);
        for (flat, &g) in y.iter().enumerate() {
            let o = unravel(flat, &out);
            let (u, v) = (a[src(&o, &a_shape)], b[src(&o, &b_shape)]);
            let w = match op { BinaryOp::Add => u.wrapping_add(v), BinaryOp::Sub => u.wrapping_sub(v), BinaryOp::Mul => u.wrapping_mul(v), BinaryOp::Div => if v == 0 { 0 } else { u.wrapping_div(v) } };
            prop_assert_eq!(g, w, "i32 {:?}", op);
        }
    }

    #[test]
    fn compare_and_where_match_naive(
        out in prop::collection::vec(prop_oneof![4 => 1usize..5, 1 => Just(0usize), 1 => 5usize..30], 0..=6),
        picks in (any::<u8>(), any::<u8>(), any::<u8>(), 0usize..7, 0usize..7, 0usize..7),
        op in 0u8..5,
        seed in any::<u32>(),
    ) {
        let op = [CompareOp::Eq, CompareOp::Less, CompareOp::Greater, CompareOp::LessEq, CompareOp::GreaterEq][op as usize];
        let (a_shape, sa) = operand(&out, picks.0, picks.3);
        let (b_shape, sb) = operand(&out, picks.1, picks.4);
        let (c_shape, sc) = operand(&out, picks.2, picks.5);
        let p = BinaryNd { out: &out, a_strides: &sa, b_strides: &sb };
        let mut rng = Rng::new(seed);
        let total: usize = out.iter().product();
        let (na, nb, nc): (usize, usize, usize) = (a_shape.iter().product(), b_shape.iter().product(), c_shape.iter().product());
        let src = |o: &[usize], shape: &[usize]| naive_index(o, &out, shape);
        let cmp = |u: f64, v: f64| match op {
            CompareOp::Eq => u == v,
            CompareOp::Less => u < v,
            CompareOp::Greater => u > v,
            CompareOp::LessEq => u <= v,
            CompareOp::GreaterEq => u >= v,
        };
        // Few distinct values so equality happens; NaN compares false.
        let a: Vec<f32> = (0..na).map(|_| [0.0, 1.0, -1.0, f32::NAN, 2.0][rng.below(5)]).collect();
        let b: Vec<f32> = (0..nb).map(|_| [0.0, 1.0, -1.0, f32::NAN, 2.0][rng.below(5)]).collect();
        let mut y = vec![7u8; total];
        compare_nd(op, &p, &a, &b, &mut y);
        for (flat, &g) in y.iter().enumerate() {
            let o = unravel(flat, &out);
            let w = cmp(f64::from(a[src(&o, &a_shape)]), f64::from(b[src(&o, &b_shape)]));
            prop_assert_eq!(g, u8::from(w), "f32 {:?} at {:?}", op, o);
        }
        let a: Vec<i64> = (0..na).map(|_| rng.below(3) as i64 - 1).collect();
        let b: Vec<i64> = (0..nb).map(|_| rng.below(3) as i64 - 1).collect();
        compare_nd(op, &p, &a, &b, &mut y);
        for (flat, &g) in y.iter().enumerate() {
            let o = unravel(flat, &out);
            let w = cmp(a[src(&o, &a_shape)] as f64, b[src(&o, &b_shape)] as f64);
            prop_assert_eq!(g, u8::from(w), "i64 {:?}", op);
        }
        let a: Vec<u8> = (0..na).map(|_| rng.below(2) as u8).collect();
        let b: Vec<u8> = (0..nb).map(|_| rng.below(2) as u8).collect();
        compare_nd(op, &p, &a, &b, &mut y);
        for (flat, &g) in y.iter().enumerate() {
            let o = unravel(flat, &out);
            let w = cmp(f64::from(a[src(&o, &a_shape)]), f64::from(b[src(&o, &b_shape)]));
            prop_assert_eq!(g, u8::from(w), "u8 {:?}", op);
        }
        // where: condition bytes other than 0/1 count as true.
        let cond: Vec<u8> = (0..nc).map(|_| [0u8, 1, 0, 255][rng.below(4)]).collect();
        let wp = WhereNd { out: &out, cond_strides: &sc, a_strides: &sa, b_strides: &sb };
        let a: Vec<i64> = (0..na as i64).collect();
        let b: Vec<i64> = (0..nb as i64).map(|v| -v - 1).collect();
        let mut y = vec![0i64; total];
        where_nd(&wp, &cond, &a, &b, &mut y);
        for (flat, &g) in y.iter().enumerate() {
            let o = unravel(flat, &out);
            let w = if cond[src(&o, &c_shape)] != 0 { a[src(&o, &a_shape)] } else { b[src(&o, &b_shape)] };
            prop_assert_eq!(g, w, "where at {:?}", o);
        }
        let af: Vec<f32> = a.iter().map(|&v| v as f32).collect();
        let bf: Vec<f32> = b.iter().map(|&v| v as f32).collect();
        let mut yf = vec![f32::NAN; total];
        where_nd(&wp, &cond, &af, &bf, &mut yf);
        let back: Vec<f32> = y.iter().map(|&v| v as f32).collect();
        prop_assert_eq!(yf, back);
    }
}

fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        idx[a] = flat % dims[a];
        flat /= dims[a];
    }
    idx
}

/// An operand for output dims `out`: the last `out.len() - drop` dims (numpy left padding),
/// each kept or broadcast to 1 by the bits of `keep`. Returns its own shape (unpadded) and its
/// strides per output axis (0 where broadcast or missing).
fn operand(out: &[usize], keep: u8, drop: usize) -> (Vec<usize>, Vec<usize>) {
    let drop = drop.min(out.len());
    let shape: Vec<usize> = (drop..out.len())
        .map(|a| if keep >> a & 1 == 1 { out[a] } else { 1 })
        .collect();
    let mut strides = vec![0; out.len()];
    let mut step = 1;
    for a in (drop..out.len()).rev() {
        let d = shape[a - drop];
        strides[a] = if d == 1 { 0 } else { step };
        step *= d;
    }
    (shape, strides)
}

/// Where output index `o` reads an operand of (unpadded) `shape`: align on the right, clamp
/// broadcast dims to 0, ravel.
fn naive_index(o: &[usize], out: &[usize], shape: &[usize]) -> usize {
    let lead = out.len() - shape.len();
    shape.iter().enumerate().fold(0, |acc, (k, &d)| {
        acc * d + if d == 1 { 0 } else { o[lead + k] }
    })
}

#[test]
fn long_f32_sums_stay_accurate() {
    // A million terms of 0.1f32: one running f32 sum is off by about 1%.
    let x = vec![0.1f32; 1_000_000];
    let want = 1_000_000.0 * f64::from(0.1f32);
    let mut y = [0.0f32];
    reduce(Reduce::Sum, 1, x.len(), 1, &x, &mut y);
    assert!((f64::from(y[0]) / want - 1.0).abs() < 1e-7, "{}", y[0]);
    // The same column-wise (inner > 1): a [1, 100_000, 3] view.
    let x = vec![0.1f32; 300_000];
    let mut y = [0.0f32; 3];
    reduce(Reduce::Mean, 1, 100_000, 3, &x, &mut y);
    for v in y {
        assert_eq!(v, 0.1f32);
    }
}

#[test]
fn empty_reductions_give_identities() {
    let x: [f32; 0] = [];
    let mut y = [0.0f32; 2];
    for (kind, want) in [
        (Reduce::Sum, 0.0),
        (Reduce::Prod, 1.0),
        (Reduce::Max, f32::NEG_INFINITY),
        (Reduce::Min, f32::INFINITY),
    ] {
        reduce(kind, 2, 0, 1, &x, &mut y);
        assert_eq!(y, [want; 2], "{kind:?}");
    }
    reduce(Reduce::Mean, 2, 0, 1, &x, &mut y);
    assert!(y[0].is_nan());
    let mut yi = [5i32; 2];
    reduce(Reduce::Mean, 1, 0, 2, &[0i32; 0], &mut yi);
    assert_eq!(yi, [0, 0]);
}

/// Independent f64 references for the unary ops (erf by Simpson's rule).
fn reference(op: UnaryMath, x: f64) -> f64 {
    let erf = |x: f64| {
        let n = 2000;
        let h = x / n as f64;
        let f = |t: f64| (-t * t).exp();
        let mut s = f(0.0) + f(x);
        for i in 1..n {
            s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        s * h / 3.0 * std::f64::consts::FRAC_2_SQRT_PI
    };
    match op {
        UnaryMath::Sqrt => x.sqrt(),
        UnaryMath::Exp => x.exp(),
        UnaryMath::Log => x.ln(),
        UnaryMath::Neg => -x,
        UnaryMath::Abs => x.abs(),
        UnaryMath::Reciprocal => 1.0 / x,
        UnaryMath::Erf => erf(x),
        UnaryMath::Softplus => x.exp().ln_1p(),
        UnaryMath::Softsign => x / (1.0 + x.abs()),
        UnaryMath::Elu { alpha } => {
            if x > 0.0 {
                x
            } else {
                f64::from(alpha) * x.exp_m1()
            }
        }
        UnaryMath::Selu { alpha, gamma } => {
            f64::from(gamma)
                * if x > 0.0 {
                    x
                } else {
                    f64::from(alpha) * x.exp_m1()
                }
        }
        UnaryMath::Gelu => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        UnaryMath::GeluTanh => {
            let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
            // 0.5 (1 + tanh u) written as the logistic of 2u, which does not cancel for u < 0.
            x / (1.0 + (-2.0 * u).exp())
        }
    }
}

#[test]
fn unary_math_matches_f64_references() {
    let ops = [
        UnaryMath::Sqrt,
        UnaryMath::Exp,
        UnaryMath::Log,
        UnaryMath::Neg,
        UnaryMath::Abs,
        UnaryMath::Reciprocal,
        UnaryMath::Erf,
        UnaryMath::Softplus,
        UnaryMath::Softsign,
        UnaryMath::Elu { alpha: 0.7 },
        UnaryMath::Selu {
            alpha: UnaryMath::SELU_ALPHA,
            gamma: UnaryMath::SELU_GAMMA,
        },
        UnaryMath::Gelu,
        UnaryMath::GeluTanh,
    ];
    let mut rng = Rng::new(99);
    let x: Vec<f32> = (0..4000)
        .map(|i| match i % 4 {
            0 => rng.uniform(-8.0, 8.0) as f32,
            1 => rng.uniform(-0.01, 0.01) as f32,
            2 => rng.uniform(0.0, 80.0) as f32,
            _ => rng.uniform(-30.0, 30.0) as f32,
        })
        .collect();
    for op in ops {
        let mut y = vec![f32::NAN; x.len()];
        unary_math(op, &x, &mut y);
        let mut d = x.clone();
        unary_math_inplace(op, &mut d);
        for (i, (&v, &g)) in x.iter().zip(&y).enumerate() {
            let want = reference(op, f64::from(v));
            // Sqrt/Log of negatives are NaN; inf results must match exactly.
            let want32 = want as f32;
            let ok = if want.is_nan() {
                g.is_nan()
            } else if want32.is_infinite() {
                g == want32
            } else {
                // Two f32 roundings of slack relative, or 1e-7 absolute for erf-based ops
                // (whose Simpson reference is good to ~1e-12).
                (f64::from(g) - want).abs() <= 2.4e-7 * want.abs() + 1e-30
                    || (matches!(op, UnaryMath::Erf | UnaryMath::Gelu)
                        && (f64::from(g) - want).abs() <= 1e-7 * v.abs().max(1.0) as f64)
            };
            assert!(ok, "{op:?}({v:e}) = {g:e}, want {want:e}");
            assert_eq!(g.to_bits(), d[i].to_bits(), "{op:?} in place");
        }
    }
}
