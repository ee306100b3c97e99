//! Shape-generic data movement against naive references written coordinate by coordinate:
//! every output element's multi-index is unravelled from its flat position and the input
//! element is located with the operation's definition (no merged axes, no tiles, no runs).
//!
//! Random ranks 0 to 6 with dims that include 0 and 1, and, for the transposes, planes large
//! enough for the tiled path; every kernel runs on `f32`, `i64` and `u8` data (the kernels are
//! generic, the tests prove the instantiations). Slices use negative steps, gathers negative
//! and out-of-range indices of both index types.

use kiln_kernels::{
    cast, cast_to_bool, copy_from_axis, copy_into_axis, expand, gather, nonzero, nonzero_count,
    pad_nd, range, slice, transpose, Expand, GatherError, PadMode, PadNd, Slice, Transpose,
};
use proptest::prelude::*;

mod common;
use common::Rng;

/// Row-major multi-index of `flat` in `dims`.
fn unravel(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; dims.len()];
    for a in (0..dims.len()).rev() {
        idx[a] = flat % dims[a];
        flat /= dims[a];
    }
    idx
}

/// Flat position of `idx` in `dims`.
fn ravel(idx: &[usize], dims: &[usize]) -> usize {
    idx.iter().zip(dims).fold(0, |acc, (&i, &d)| acc * d + i)
}

fn numel(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// The same values as `f32`, `i64` and `u8` tensors (distinct enough to catch misplacement).
fn typed(n: usize) -> (Vec<f32>, Vec<i64>, Vec<u8>) {
    let f = (0..n).map(|i| i as f32 * 0.5 - 7.0).collect();
    let i = (0..n).map(|i| i as i64 * 1_000_003 - 99).collect();
    let u = (0..n).map(|i| (i * 7 + 3) as u8).collect();
    (f, i, u)
}

/// Runs `check` for the three dtypes: `kernel(x, y)` against `reference(x)`.
macro_rules! all_dtypes {
    ($n:expr, $out:expr, |$x:ident, $y:ident| $kernel:expr, |$r:ident| $reference:expr) => {{
        let (xf, xi, xu) = typed($n);
        {
            let $x = &xf[..];
            let mut $y = vec![f32::NAN; $out];
            $kernel;
            let $r = $x;
            let want: Vec<f32> = $reference;
            prop_assert!(
                $y.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "f32: got {:?} want {:?}",
                $y,
                want
            );
        }
        {
            let $x = &xi[..];
            let mut $y = vec![i64::MIN; $out];
            $kernel;
            let $r = $x;
            let want: Vec<i64> = $reference;
            prop_assert_eq!(&$y, &want, "i64");
        }
        {
            let $x = &xu[..];
            let mut $y = vec![0xAAu8; $out];
            $kernel;
            let $r = $x;
            let want: Vec<u8> = $reference;
            prop_assert_eq!(&$y, &want, "u8");
        }
    }};
}

/// Dims for a rank-0..=6 tensor: mostly 1..4, now and then 0 or up to 19.
fn dims(max_rank: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![6 => 1usize..5, 1 => Just(0usize), 2 => 5usize..20],
        0..=max_rank,
    )
    .prop_filter("small enough", |d| d.iter().product::<usize>() <= 20_000)
}

/// A random permutation of `0..n`.
fn permutation(n: usize, seed: u32) -> Vec<usize> {
    let mut rng = Rng::new(seed);
    let mut p: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        p.swap(i, rng.below(i + 1));
    }
    p
}

/// Naive transpose: output index `o` reads input index `i` with `i[perm[k]] = o[k]`.
fn naive_transpose<T: Copy>(shape: &[usize], perm: &[usize], x: &[T]) -> Vec<T> {
    let out: Vec<usize> = perm.iter().map(|&a| shape[a]).collect();
    (0..numel(&out))
        .map(|flat| {
            let o = unravel(flat, &out);
            let mut i = vec![0; shape.len()];
            for k in 0..perm.len() {
                i[perm[k]] = o[k];
            }
            x[ravel(&i, shape)]
        })
        .collect()
}

/// Naive slice: output index `o` reads input index `starts + o * steps`, axis by axis.
fn naive_slice<T: Copy>(
    shape: &[usize],
    starts: &[usize],
    steps: &[isize],
    out: &[usize],
    x: &[T],
) -> Vec<T> {
    (0..numel(out))
        .map(|flat| {
            let o = unravel(flat, out);
            let i: Vec<usize> = (0..shape.len())
                .map(|a| (starts[a] as isize + o[a] as isize * steps[a]) as usize)
                .collect();
            x[ravel(&i, shape)]
        })
        .collect()
}

/// Naive expand: a coordinate along a dim of size 1 is 0.
fn naive_expand<T: Copy>(out: &[usize], in_dims: &[usize], x: &[T]) -> Vec<T> {
    (0..numel(out))
        .map(|flat| {
            let o = unravel(flat, out);
            let i: Vec<usize> = o
                .iter()
                .zip(in_dims)
                .map(|(&v, &d)| if d == 1 { 0 } else { v })
                .collect();
            x[ravel(&i, in_dims)]
        })
        .collect()
}

/// Naive gather on `[outer, axis_len, inner]`, negative indices from the end.
fn naive_gather<T: Copy>(
    outer: usize,
    axis_len: usize,
    inner: usize,
    idx: &[i64],
    x: &[T],
) -> Vec<T> {
    let mut v = Vec::new();
    for o in 0..outer {
        for &i in idx {
            let i = if i < 0 { i + axis_len as i64 } else { i } as usize;
            for k in 0..inner {
                v.push(x[(o * axis_len + i) * inner + k]);
            }
        }
    }
    v
}

/// Naive pad: each output coordinate mapped independently; reflect as a periodic mirror
/// (period `2 (n - 1)`), edge as a clamp, constant as "inside or not".
fn naive_pad<T: Copy>(
    shape: &[usize],
    before: &[usize],
    after: &[usize],
    mode: PadMode,
    x: &[T],
    fill: T,
) -> Vec<T> {
    let r = shape.len();
    let out: Vec<usize> = (0..r).map(|a| before[a] + shape[a] + after[a]).collect();
    let map = |c: isize, n: usize| -> Option<usize> {
        let n = n as isize;
        match mode {
            PadMode::Constant => (0..n).contains(&c).then_some(c as usize),
            PadMode::Edge => Some(c.clamp(0, n - 1) as usize),
            PadMode::Reflect => {
                if n == 1 {
                    return Some(0);
                }
                let period = 2 * (n - 1);
                let m = c.rem_euclid(period);
                Some(if m < n { m } else { period - m } as usize)
            }
        }
    };
    (0..numel(&out))
        .map(|flat| {
            let o = unravel(flat, &out);
            let i: Option<Vec<usize>> = (0..r)
                .map(|a| map(o[a] as isize - before[a] as isize, shape[a]))
                .collect();
            i.map_or(fill, |i| x[ravel(&i, shape)])
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(300) })]

    #[test]
    fn transpose_matches_naive(shape in dims(6), seed in any::<u32>()) {
        let perm = permutation(shape.len(), seed);
        let p = Transpose { shape: &shape, perm: &perm };
        let n = numel(&shape);
        all_dtypes!(n, n, |x, y| transpose(&p, x, &mut y), |x| naive_transpose(&shape, &perm, x));
    }

    #[test]
    fn transpose_of_big_planes_takes_the_tiles(
        shape in prop::collection::vec(1usize..50, 2..=4)
            .prop_filter("small", |d| d.iter().product::<usize>() <= 30_000),
        seed in any::<u32>(),
    ) {
        // Always move the last axis, so the tiled 2-D path runs with ragged edge tiles.
        let mut perm = permutation(shape.len(), seed);
        let r = shape.len();
        if perm[r - 1] == r - 1 {
            perm.swap(r - 1, 0);
        }
        let p = Transpose { shape: &shape, perm: &perm };
        let n = numel(&shape);
        all_dtypes!(n, n, |x, y| transpose(&p, x, &mut y), |x| naive_transpose(&shape, &perm, x));
    }

    #[test]
    fn slice_matches_naive(shape in dims(6), seed in any::<u32>()) {
        let mut rng = Rng::new(seed);
        let r = shape.len();
        let (mut starts, mut steps, mut out) = (vec![0; r], vec![1isize; r], vec![0; r]);
        for a in 0..r {
            let step = (rng.below(3) + 1) as isize * if rng.below(2) == 0 { 1 } else { -1 };
            steps[a] = step;
            if shape[a] == 0 {
                continue;
            }
            let start = rng.below(shape[a]);
            // Elements reachable from `start` in the step's direction, then any count of them.
            let reach = if step > 0 {
                (shape[a] - start).div_ceil(step as usize)
            } else {
                start / step.unsigned_abs() + 1
            };
            starts[a] = start;
            out[a] = rng.below(reach + 1);
        }
        let p = Slice { shape: &shape, starts: &starts, steps: &steps, out: &out };
        let n = numel(&out);
        all_dtypes!(numel(&shape), n, |x, y| slice(&p, x, &mut y), |x| naive_slice(&shape, &starts, &steps, &out, x));
    }

    #[test]
    fn expand_matches_naive(out in dims(6), keep in any::<u8>()) {
        // Input dims: each output dim kept or broadcast from 1.
        let in_dims: Vec<usize> = out
            .iter()
            .enumerate()
            .map(|(a, &d)| if keep >> a & 1 == 1 { d } else { 1 })
            .collect();
        let mut strides = vec![0; out.len()];
        let mut step = 1;
        for a in (0..out.len()).rev() {
            strides[a] = if in_dims[a] == 1 { 0 } else { step };
            step *= in_dims[a];
        }
        let p = Expand { out: &out, strides: &strides };
        let n = numel(&out);
        all_dtypes!(numel(&in_dims), n, |x, y| expand(&p, x, &mut y), |x| naive_expand(&out, &in_dims, x));
    }

    #[test]
    fn gather_matches_naive(
        outer in 0usize..4,
        axis_len in 0usize..7,
        inner in 0usize..5,
        count in 0usize..9,
        seed in any::<u32>(),
        bad in prop::option::weighted(0.3, 0usize..9),
    ) {
        let mut rng = Rng::new(seed);
        let mut idx: Vec<i64> = (0..count)
            .map(|_| if axis_len == 0 { 0 } else { rng.below(2 * axis_len) as i64 - axis_len as i64 })
            .collect();
        // Without a valid index to draw from, an axis of length 0 only gathers nothing.
        if axis_len == 0 {
            idx.clear();
        }
        let mut first_bad = None;
        if let Some(b) = bad.filter(|&b| b < idx.len()) {
            idx[b] = if rng.below(2) == 0 { axis_len as i64 } else { -(axis_len as i64) - 1 - rng.below(3) as i64 };
            first_bad = Some(b);
        }
        let idx32: Vec<i32> = idx.iter().map(|&i| i as i32).collect();
        let n = outer * axis_len * inner;
        let out = outer * idx.len() * inner;
        match first_bad {
            Some(position) => {
                let err = GatherError { position, index: idx[position], len: axis_len };
                let want = Err(err);
                let (xf, _, _) = typed(n);
                let mut y = vec![-1.0f32; out];
                prop_assert_eq!(gather(outer, axis_len, inner, &xf, &idx, &mut y), want);
                prop_assert_eq!(gather(outer, axis_len, inner, &xf, &idx32, &mut y), want);
                prop_assert!(y.iter().all(|&v| v == -1.0), "gather wrote before failing");
                let msg = err.to_string();
                prop_assert!(msg.contains("out of range"), "{}", msg);
            }
            None => {
                all_dtypes!(n, out, |x, y| gather(outer, axis_len, inner, x, &idx, &mut y).unwrap(), |x| naive_gather(outer, axis_len, inner, &idx, x));
                all_dtypes!(n, out, |x, y| gather(outer, axis_len, inner, x, &idx32, &mut y).unwrap(), |x| naive_gather(outer, axis_len, inner, &idx, x));
            }
        }
    }

    #[test]
    fn concat_and_split_on_any_axis(base in dims(5), axis_pick in any::<usize>(), parts in prop::collection::vec(0usize..4, 1..4)) {
        prop_assume!(!base.is_empty());
        let axis = axis_pick % base.len();
        let outer: usize = base[..axis].iter().product();
        let inner: usize = base[axis + 1..].iter().product();
        let total_axis: usize = parts.iter().sum();
        let mut out_dims = base.clone();
        out_dims[axis] = total_axis;
        // Input j has dims base with parts[j] on the axis; values tagged by input number.
        let inputs: Vec<Vec<i64>> = parts
            .iter()
            .enumerate()
            .map(|(j, &p)| (0..outer * p * inner).map(|e| (j * 100_000 + e) as i64).collect())
            .collect();
        let mut y = vec![-1i64; numel(&out_dims)];
        let mut offset = 0;
        for (x, &p) in inputs.iter().zip(&parts) {
            copy_into_axis(outer, p * inner, total_axis * inner, offset * inner, x, &mut y);
            offset += p;
        }
        // Naive: output coordinate c on the axis belongs to the input whose range holds it.
        for (flat, &got) in y.iter().enumerate() {
            let mut o = unravel(flat, &out_dims);
            let (mut j, mut c) = (0, o[axis]);
            while c >= parts[j] {
                c -= parts[j];
                j += 1;
            }
            o[axis] = c;
            let mut in_dims = base.clone();
            in_dims[axis] = parts[j];
            prop_assert_eq!(got, inputs[j][ravel(&o, &in_dims)]);
        }
        // Split the concat back into the inputs.
        let mut offset = 0;
        for (x, &p) in inputs.iter().zip(&parts) {
            let mut back = vec![-1i64; x.len()];
            copy_from_axis(outer, p * inner, total_axis * inner, offset * inner, &y, &mut back);
            prop_assert_eq!(&back, x);
            offset += p;
        }
    }

    #[test]
    fn pad_matches_naive(
        shape in prop::collection::vec(1usize..5, 0..=5),
        seed in any::<u32>(),
        mode in 0u8..3,
    ) {
        let mode = [PadMode::Constant, PadMode::Reflect, PadMode::Edge][mode as usize];
        let mut rng = Rng::new(seed);
        let r = shape.len();
        let limit = |n: usize| match mode {
            PadMode::Reflect => n, // pads below the dim
            _ => 4,
        };
        let before: Vec<usize> = shape.iter().map(|&n| rng.below(limit(n))).collect();
        let after: Vec<usize> = shape.iter().map(|&n| rng.below(limit(n))).collect();
        let out: Vec<usize> = (0..r).map(|a| before[a] + shape[a] + after[a]).collect();
        let p = PadNd { shape: &shape, before: &before, after: &after, mode };
        all_dtypes!(numel(&shape), numel(&out), |x, y| pad_nd(&p, x, &mut y, x[0]), |x| naive_pad(&shape, &before, &after, mode, x, x[0]));
        // A constant that is not an input value.
        if mode == PadMode::Constant {
            let (xf, _, _) = typed(numel(&shape));
            let mut y = vec![f32::NAN; numel(&out)];
            pad_nd(&p, &xf, &mut y, 42.5);
            prop_assert_eq!(y, naive_pad(&shape, &before, &after, mode, &xf, 42.5));
        }
    }

    #[test]
    fn nonzero_matches_naive(shape in dims(4), seed in any::<u32>()) {
        let mut rng = Rng::new(seed);
        let n = numel(&shape);
        let x: Vec<f32> = (0..n)
            .map(|_| [0.0, -0.0, 1.5, f32::NAN, 0.0, -2.0][rng.below(6)])
            .collect();
        // Naive: scan in row-major order, collect each nonzero's coordinates (NaN counts).
        let dims: Vec<usize> = if shape.is_empty() { vec![1] } else { shape.clone() };
        let hits: Vec<Vec<usize>> = (0..n)
            .filter(|&i| !(x[i] == 0.0))
            .map(|i| unravel(i, &dims))
            .collect();
        let count = nonzero_count(&x);
        prop_assert_eq!(count, hits.len());
        let mut y = vec![-1i64; dims.len() * count];
        nonzero(&shape, count, &x, &mut y);
        for (j, h) in hits.iter().enumerate() {
            for a in 0..dims.len() {
                prop_assert_eq!(y[a * count + j], h[a] as i64);
            }
        }
        // The same on u8 (bool) data.
        let b: Vec<u8> = x.iter().map(|&v| u8::from(v != 0.0)).collect();
        prop_assert_eq!(nonzero_count(&b), count);
        let mut yb = vec![-1i64; dims.len() * count];
        nonzero(&shape, count, &b, &mut yb);
        prop_assert_eq!(yb, y);
    }
}

#[test]
fn transpose_hand_case_and_rank_zero() {
    // [2, 3] -> [3, 2].
    let x = [1, 2, 3, 4, 5, 6];
    let mut y = [0; 6];
    transpose(
        &Transpose {
            shape: &[2, 3],
            perm: &[1, 0],
        },
        &x,
        &mut y,
    );
    assert_eq!(y, [1, 4, 2, 5, 3, 6]);
    let mut y = [0.0f64];
    transpose(
        &Transpose {
            shape: &[],
            perm: &[],
        },
        &[7.5],
        &mut y,
    );
    assert_eq!(y, [7.5]);
    // Usable as a constant, as generated code writes it.
    const P: Transpose<'static> = Transpose {
        shape: &[2, 1, 3],
        perm: &[2, 0, 1],
    };
    let mut y = [0u8; 6];
    transpose(&P, &[1, 2, 3, 4, 5, 6], &mut y);
    assert_eq!(y, [1, 4, 2, 5, 3, 6]);
}

#[test]
fn slice_reverses_with_negative_steps() {
    let x = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    let mut y = [0; 4];
    // x[8:0:-2] = [8, 6, 4, 2].
    slice(
        &Slice {
            shape: &[10],
            starts: &[8],
            steps: &[-2],
            out: &[4],
        },
        &x,
        &mut y,
    );
    assert_eq!(y, [8, 6, 4, 2]);
    // [2, 5] reversed on both axes.
    let mut y = [0; 10];
    slice(
        &Slice {
            shape: &[2, 5],
            starts: &[1, 4],
            steps: &[-1, -1],
            out: &[2, 5],
        },
        &x,
        &mut y,
    );
    assert_eq!(y, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
}

#[test]
fn casts_follow_numpy_astype() {
    let f = [
        2.7f32,
        -2.7,
        f32::NAN,
        1e10,
        -1e10,
        f32::INFINITY,
        -0.0,
        300.5,
    ];
    let mut i = [0i32; 8];
    cast(&f, &mut i);
    assert_eq!(i, [2, -2, 0, i32::MAX, i32::MIN, i32::MAX, 0, 300]);
    let mut l = [0i64; 8];
    cast(&f, &mut l);
    assert_eq!(
        l,
        [2, -2, 0, 10_000_000_000, -10_000_000_000, i64::MAX, 0, 300]
    );
    // Float to u8 saturates (numpy leaves out-of-range values undefined).
    let mut u = [0u8; 8];
    cast(&f, &mut u);
    assert_eq!(u, [2, 0, 0, 255, 0, 255, 0, 255]);
    // Int to int wraps; int to float rounds to nearest.
    let big = [(1i64 << 32) + 5, -1, (1 << 24) + 1, i64::MAX];
    let mut i = [0i32; 4];
    cast(&big, &mut i);
    assert_eq!(i, [5, -1, (1 << 24) + 1, -1]);
    let mut u = [0u8; 4];
    cast(&big, &mut u);
    assert_eq!(u, [5, 255, 1, 255]);
    let mut g = [0.0f32; 4];
    cast(&big, &mut g);
    assert_eq!(g, [4294967300.0, -1.0, 16777216.0, 9.223372e18]);
    let mut d = [0.0f64; 4];
    cast(&big, &mut d);
    assert_eq!(
        d,
        [4294967301.0, -1.0, 16777217.0, 9.223_372_036_854_776e18]
    );
    // f64 to f32 rounds and overflows to infinity.
    let mut g = [0.0f32; 3];
    cast(&[1e300f64, 0.1, -1e-300], &mut g);
    assert_eq!(g[0], f32::INFINITY);
    assert_eq!(g[1], 0.1f32);
    assert_eq!(g[2].to_bits(), (-0.0f32).to_bits());
    // u8 (bool) to anything is 0/1-valued.
    let mut g = [9.0f64; 2];
    cast(&[0u8, 1], &mut g);
    assert_eq!(g, [0.0, 1.0]);
    let mut b = [9u8; 5];
    cast_to_bool(&[0.0f32, -0.0, f32::NAN, 2.0, -1e-45], &mut b);
    assert_eq!(b, [0, 0, 1, 1, 1]);
    let mut b = [9u8; 3];
    cast_to_bool(&[0i64, -7, 256], &mut b);
    assert_eq!(b, [0, 1, 1]);
}

#[test]
fn range_matches_arange() {
    let mut y = [0.0f32; 5];
    range(1.0, 0.5, &mut y);
    assert_eq!(y, [1.0, 1.5, 2.0, 2.5, 3.0]);
    let mut y = [0i64; 4];
    range(10, -3, &mut y);
    assert_eq!(y, [10, 7, 4, 1]);
    let mut y = [0i32; 3];
    range(-1, 2, &mut y);
    assert_eq!(y, [-1, 1, 3]);
    // A long float range does not drift: element i is start + i * delta rounded once.
    let mut y = vec![0.0f32; 100_000];
    range(0.0, 0.1, &mut y);
    for (i, &v) in y.iter().enumerate() {
        assert_eq!(v, (i as f64 * f64::from(0.1f32)) as f32, "element {i}");
    }
}

#[test]
fn pad_constant_hand_case() {
    // [[1, 2]] padded by one row above and one column each side.
    let mut y = [0; 8];
    let p = PadNd {
        shape: &[1, 2],
        before: &[1, 1],
        after: &[0, 1],
        mode: PadMode::Constant,
    };
    pad_nd(&p, &[1, 2], &mut y, 9);
    assert_eq!(y, [9, 9, 9, 9, 9, 1, 2, 9]);
    let p = PadNd {
        shape: &[3],
        before: &[2],
        after: &[2],
        mode: PadMode::Reflect,
    };
    let mut y = [0; 7];
    pad_nd(&p, &[1, 2, 3], &mut y, 0);
    assert_eq!(y, [3, 2, 1, 2, 3, 2, 1]);
    let p = PadNd {
        shape: &[3],
        before: &[2],
        after: &[1],
        mode: PadMode::Edge,
    };
    let mut y = [0; 6];
    pad_nd(&p, &[1, 2, 3], &mut y, 0);
    assert_eq!(y, [1, 1, 1, 2, 3, 3]);
}
