//! Batched `matmul` with numpy broadcasting against a naive triple loop, on the portable GEMM
//! and on every ISA table's GEMM this CPU has (the generated code passes `Kernels::gemm`).
//!
//! Batch shapes of rank 0 to 3 where each operand has its own, shorter or broadcast (size 1)
//! batch dims; the naive reference locates each operand's matrix by aligning batch indices on
//! the right and clamping broadcast dims to 0, as numpy's rules say. `m`, `k`, `n` include 0
//! and 1, and the "shared right operand" case the kernel folds into one GEMM.

mod common;

use kiln_kernels::{matmul, matmul_f64, MatMul, PORTABLE};
use proptest::prelude::*;

/// xorshift32 in `[-1, 1)`.
fn data(n: usize, seed: u32) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
        })
        .collect()
}

/// An operand's batch dims for output batch `out`: the last `out.len() - drop` dims, each
/// kept or made 1 by the bits of `keep`; and its strides per output batch dim (matrix size
/// `mat`, 0 where broadcast or missing).
fn operand(out: &[usize], keep: u8, drop: usize, mat: usize) -> (Vec<usize>, Vec<usize>) {
    let drop = drop.min(out.len());
    let dims: Vec<usize> = (drop..out.len())
        .map(|a| if keep >> a & 1 == 1 { out[a] } else { 1 })
        .collect();
    let mut strides = vec![0; out.len()];
    let mut step = mat;
    for a in (drop..out.len()).rev() {
        let d = dims[a - drop];
        strides[a] = if d == 1 { 0 } else { step };
        step *= d;
    }
    (dims, strides)
}

/// The naive product: for each output batch index, find each operand's matrix by numpy's
/// right-aligned broadcasting, then `y[i, j] = sum_p a[i, p] b[p, j]` in f64.
#[allow(clippy::too_many_arguments)]
fn naive(
    batch: &[usize],
    a_dims: &[usize],
    b_dims: &[usize],
    m: usize,
    k: usize,
    n: usize,
    a: &[f64],
    b: &[f64],
) -> Vec<f64> {
    let total: usize = batch.iter().product();
    let mut y = Vec::new();
    for flat in 0..total {
        let mut idx = vec![0; batch.len()];
        let mut f = flat;
        for d in (0..batch.len()).rev() {
            idx[d] = f % batch[d];
            f /= batch[d];
        }
        let locate = |dims: &[usize]| {
            let lead = batch.len() - dims.len();
            dims.iter().enumerate().fold(0, |acc, (q, &d)| {
                acc * d + if d == 1 { 0 } else { idx[lead + q] }
            })
        };
        let (ia, ib) = (locate(a_dims) * m * k, locate(b_dims) * k * n);
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    s += a[ia + i * k + p] * b[ib + p * n + j];
                }
                y.push(s);
            }
        }
    }
    y
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::with_cases(150) })]

    #[test]
    fn matmul_matches_naive_on_every_gemm(
        batch in prop::collection::vec(prop_oneof![3 => 1usize..4, 1 => Just(0usize)], 0..=3),
        picks in (any::<u8>(), any::<u8>(), 0usize..4, 0usize..4),
        mkn in (0usize..9, 0usize..12, 0usize..20),
        shared_b in prop::bool::weighted(0.25),
        seed in any::<u32>(),
    ) {
        let (m, k, n) = mkn;
        let (a_dims, a_strides) = operand(&batch, picks.0, picks.2, m * k);
        // Sometimes a 2-D right operand shared by the whole batch (the folded case).
        let (b_dims, b_strides) = if shared_b {
            (vec![], vec![0; batch.len()])
        } else {
            operand(&batch, picks.1, picks.3, k * n)
        };
        let a = data(a_dims.iter().product::<usize>() * m * k, seed);
        let b = data(b_dims.iter().product::<usize>() * k * n, seed ^ 0x5555);
        let p = MatMul { batch: &batch, a_strides: &a_strides, b_strides: &b_strides, m, k, n };
        let a64: Vec<f64> = a.iter().map(|&v| f64::from(v)).collect();
        let b64: Vec<f64> = b.iter().map(|&v| f64::from(v)).collect();
        let want = naive(&batch, &a_dims, &b_dims, m, k, n, &a64, &b64);
        let mut gemms = vec![PORTABLE];
        gemms.extend(common::isas("matmul"));
        for t in gemms {
            let mut y = vec![f32::NAN; want.len()];
            matmul(&p, &a, &b, &mut y, t.gemm);
            for (i, (&g, &w)) in y.iter().zip(&want).enumerate() {
                prop_assert!((f64::from(g) - w).abs() <= 1e-5 * w.abs().max(1.0), "{} [{i}]: got {g} want {w} ({p:?})", t.isa);
            }
        }
        let mut y = vec![f64::NAN; want.len()];
        matmul_f64(&p, &a64, &b64, &mut y);
        for (i, (&g, &w)) in y.iter().zip(&want).enumerate() {
            prop_assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "f64 [{i}]: got {g} want {w}");
        }
    }
}

#[test]
fn matmul_hand_case_with_a_broadcast_left_operand() {
    // a: [2, 2] shared, b: [2, 2, 1] per batch.
    let a = [1.0, 2.0, 3.0, 4.0];
    let b = [1.0, 1.0, 0.0, 1.0];
    const P: MatMul<'static> = MatMul {
        batch: &[2],
        a_strides: &[0],
        b_strides: &[2],
        m: 2,
        k: 2,
        n: 1,
    };
    let mut y = [f32::NAN; 4];
    matmul(&P, &a, &b, &mut y, kiln_kernels::gemm);
    assert_eq!(y, [3.0, 7.0, 2.0, 4.0]);
}
