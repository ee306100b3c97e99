//! Matrix products: [`gemm`] (`C = A B`) and [`dense`] (a fully connected layer).
//!
//! Algorithm sketch for `gemm` (all row-major, `A` is `m x k`, `B` is `k x n`):
//!
//! ```text
//! for each block of up to NC columns j0..j1:           // keeps the C rows' block in L1
//!     for each group of ROWS rows of C (then single leftover rows):
//!         C[rows, j0..j1] = 0
//!         for p in 0..k:                               // one row of B per step ...
//!             C[r, j0..j1] += A[r, p] * B[p, j0..j1]   // ... reused for ROWS rows of C
//! ```
//!
//! The innermost loop runs over contiguous columns of `B` and `C` with no loop-carried
//! dependency, so LLVM vectorises it. Updating four rows of `C` per row of `B` read cuts the
//! traffic on `B` by four. Each `C[i, j]` is still summed in plain `p` order.
//!
//! `dense` multiplies by a transposed weight (`[n_out, n_in]`, the PyTorch `Linear` layout),
//! so each output is a dot product of two contiguous rows; the dot product keeps eight partial
//! sums so that it vectorises (a single running sum is a dependency chain LLVM must not
//! reorder).

use super::epilogue::epilogue;
use crate::Activation;

/// Column block width: a block of four rows of `C` (4 x 256 x 4 bytes = 4 KiB) stays in L1
/// while all of `k` streams past it.
const NC: usize = 256;

/// Rows of `C` updated per row of `B` read.
const ROWS: usize = 4;

/// `C[m, n] = A[m, k] * B[k, n]`, overwriting `C`. All matrices row-major and contiguous.
pub fn gemm(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    debug_assert!(
        a.len() >= m * k,
        "gemm: a has {} < m*k = {}",
        a.len(),
        m * k
    );
    debug_assert!(
        b.len() >= k * n,
        "gemm: b has {} < k*n = {}",
        b.len(),
        k * n
    );
    debug_assert!(
        c.len() >= m * n,
        "gemm: c has {} < m*n = {}",
        c.len(),
        m * n
    );
    if m == 0 || n == 0 {
        return;
    }
    let a = &a[..m * k];
    let b = &b[..k * n];
    let c = &mut c[..m * n];

    let mut j0 = 0;
    while j0 < n {
        let j1 = (j0 + NC).min(n);
        let mut i = 0;
        while i + ROWS <= m {
            let a_rows = &a[i * k..(i + ROWS) * k];
            let c_rows = &mut c[i * n..(i + ROWS) * n];
            block_rows4(k, n, j0, j1, a_rows, b, c_rows);
            i += ROWS;
        }
        while i < m {
            let a_row = &a[i * k..(i + 1) * k];
            let c_blk = &mut c[i * n + j0..i * n + j1];
            c_blk.fill(0.0);
            for (p, &aip) in a_row.iter().enumerate() {
                let b_blk = &b[p * n + j0..p * n + j1];
                for (cv, &bv) in c_blk.iter_mut().zip(b_blk) {
                    *cv += aip * bv;
                }
            }
            i += 1;
        }
        j0 = j1;
    }
}

/// Columns `j0..j1` of four consecutive rows of `C` (`c_rows` is those four full rows).
fn block_rows4(
    k: usize,
    n: usize,
    j0: usize,
    j1: usize,
    a_rows: &[f32],
    b: &[f32],
    c_rows: &mut [f32],
) {
    let (c0, rest) = c_rows.split_at_mut(n);
    let (c1, rest) = rest.split_at_mut(n);
    let (c2, c3) = rest.split_at_mut(n);
    // Zipping the four equal-length row blocks lets LLVM drop every bounds check in the loop.
    let c0 = &mut c0[j0..j1];
    let c1 = &mut c1[j0..j1];
    let c2 = &mut c2[j0..j1];
    let c3 = &mut c3[j0..j1];
    c0.fill(0.0);
    c1.fill(0.0);
    c2.fill(0.0);
    c3.fill(0.0);
    for p in 0..k {
        let a0 = a_rows[p];
        let a1 = a_rows[k + p];
        let a2 = a_rows[2 * k + p];
        let a3 = a_rows[3 * k + p];
        let b_blk = &b[p * n + j0..p * n + j1];
        let rows = c0
            .iter_mut()
            .zip(c1.iter_mut())
            .zip(c2.iter_mut())
            .zip(c3.iter_mut());
        for ((((x0, x1), x2), x3), &bv) in rows.zip(b_blk) {
            *x0 += a0 * bv;
            *x1 += a1 * bv;
            *x2 += a2 * bv;
            *x3 += a3 * bv;
        }
    }
}

/// Dot product of the first `min(a.len(), b.len())` elements, with eight partial sums.
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let mut acc = [0.0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (xa, xb) in ca.zip(cb) {
        for ((s, &x), &y) in acc.iter_mut().zip(xa).zip(xb) {
            *s += x * y;
        }
    }
    // Pairwise combination of the lanes, then the tail.
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// `out[b, o] = act(sum_i input[b, i] * weight[o, i] + bias[o])`, with `weight` laid out
/// `[n_out, n_in]` (PyTorch `Linear`, ONNX `Gemm` with `transB = 1`).
#[allow(clippy::too_many_arguments)] // The signature is the contract generated code calls.
pub fn dense(
    batch: usize,
    n_in: usize,
    n_out: usize,
    input: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    debug_assert!(input.len() >= batch * n_in, "dense: input too short");
    debug_assert!(weight.len() >= n_out * n_in, "dense: weight too short");
    debug_assert!(
        bias.is_none_or(|b| b.len() >= n_out),
        "dense: bias too short"
    );
    debug_assert!(out.len() >= batch * n_out, "dense: out too short");
    if n_out == 0 {
        return;
    }
    for (bi, out_row) in out[..batch * n_out].chunks_exact_mut(n_out).enumerate() {
        let x = &input[bi * n_in..(bi + 1) * n_in];
        for (o, y) in out_row.iter_mut().enumerate() {
            let w = &weight[o * n_in..(o + 1) * n_in];
            *y = dot(x, w) + bias.map_or(0.0, |b| b[o]);
        }
        // The bias differs per element, so it was added above; the epilogue adds the
        // activation.
        epilogue(out_row, 1.0, 0.0, act);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::testutil::{assert_close, XorShift};
    use std::vec;
    use std::vec::Vec;

    /// The textbook definition: C[i][j] = sum_p A[i][p] B[p][j], accumulated in f64.
    fn naive_gemm(m: usize, n: usize, k: usize, a: &[f32], b: &[f32]) -> Vec<f64> {
        let mut c = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f64;
                for p in 0..k {
                    s += f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
                }
                c[i * n + j] = s;
            }
        }
        c
    }

    #[test]
    fn gemm_hand_computed_2x2() {
        // [1 2; 3 4] * [5 6; 7 8] = [19 22; 43 50].
        let mut c = [f32::NAN; 4];
        gemm(
            2,
            2,
            2,
            &[1.0, 2.0, 3.0, 4.0],
            &[5.0, 6.0, 7.0, 8.0],
            &mut c,
        );
        assert_eq!(c, [19.0, 22.0, 43.0, 50.0]);
    }

    #[test]
    fn gemm_matches_naive_on_random_shapes() {
        let mut rng = XorShift::new(42);
        // Covers single rows/columns, leftover rows after groups of four, column blocks with a
        // ragged last block (n > NC), and k = 0 (C must become zero, not stay NaN).
        let shapes = [
            (1, 1, 1),
            (1, 7, 3),
            (3, 1, 5),
            (4, 4, 4),
            (5, 9, 2),
            (7, 13, 17),
            (9, 300, 11),
            (6, 2 * NC + 3, 5),
            (4, 3, 0),
            (13, 31, 64),
        ];
        for (m, n, k) in shapes {
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let mut c = vec![f32::NAN; m * n];
            gemm(m, n, k, &a, &b, &mut c);
            assert_close(
                &c,
                &naive_gemm(m, n, k, &a, &b),
                &std::format!("gemm {m}x{n}x{k}"),
            );
        }
        for _ in 0..50 {
            let (m, n, k) = (1 + rng.below(12), 1 + rng.below(40), 1 + rng.below(40));
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let mut c = vec![f32::NAN; m * n];
            gemm(m, n, k, &a, &b, &mut c);
            assert_close(
                &c,
                &naive_gemm(m, n, k, &a, &b),
                &std::format!("gemm {m}x{n}x{k}"),
            );
        }
    }

    #[test]
    fn gemm_only_writes_its_prefix() {
        let mut c = [7.0f32; 6];
        gemm(1, 2, 1, &[2.0], &[3.0, 4.0], &mut c);
        assert_eq!(c, [6.0, 8.0, 7.0, 7.0, 7.0, 7.0]);
    }

    fn naive_dense(
        batch: usize,
        n_in: usize,
        n_out: usize,
        x: &[f32],
        w: &[f32],
        bias: Option<&[f32]>,
        act: Activation,
    ) -> Vec<f64> {
        let mut out = Vec::new();
        for bi in 0..batch {
            for o in 0..n_out {
                let mut s = bias.map_or(0.0, |b| f64::from(b[o]));
                for i in 0..n_in {
                    s += f64::from(x[bi * n_in + i]) * f64::from(w[o * n_in + i]);
                }
                // Activations are checked on their own; here the f64 sum is rounded first.
                out.push(f64::from(act.apply(s as f32)));
            }
        }
        out
    }

    #[test]
    fn dense_hand_computed() {
        // x = [1, 2]; W = [[1, 0], [0, 1], [1, 1]]; b = [0.5, -3, 0] -> relu([1.5, -1, 3]).
        let w = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
        let mut out = [f32::NAN; 3];
        dense(
            1,
            2,
            3,
            &[1.0, 2.0],
            &w,
            Some(&[0.5, -3.0, 0.0]),
            Activation::Relu,
            &mut out,
        );
        assert_eq!(out, [1.5, 0.0, 3.0]);
    }

    #[test]
    fn dense_matches_naive() {
        let mut rng = XorShift::new(5);
        for (batch, n_in, n_out) in [(1, 1, 1), (2, 7, 3), (3, 8, 5), (2, 64, 10), (4, 101, 9)] {
            for (bias_on, act) in [
                (false, Activation::None),
                (true, Activation::Relu),
                (true, Activation::Tanh),
            ] {
                let x = rng.vec(batch * n_in);
                let w = rng.vec(n_out * n_in);
                let b = rng.vec(n_out);
                let bias = bias_on.then_some(&b[..]);
                let mut out = vec![f32::NAN; batch * n_out];
                dense(batch, n_in, n_out, &x, &w, bias, act, &mut out);
                let want = naive_dense(batch, n_in, n_out, &x, &w, bias, act);
                assert_close(
                    &out,
                    &want,
                    &std::format!("dense {batch}x{n_in}->{n_out} {act:?}"),
                );
            }
        }
    }

    #[test]
    fn dot_matches_naive_including_tails() {
        let mut rng = XorShift::new(9);
        for len in [0, 1, 7, 8, 9, 16, 23, 100] {
            let a = rng.vec(len);
            let b = rng.vec(len);
            let want: f64 = a
                .iter()
                .zip(&b)
                .map(|(&x, &y)| f64::from(x) * f64::from(y))
                .sum();
            assert_close(&[dot(&a, &b)], &[want], &std::format!("dot len {len}"));
        }
    }
}
