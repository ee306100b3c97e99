//! Batched matrix products with numpy `matmul` broadcasting: [`matmul`] (`f32`, on a caller's
//! GEMM) and [`matmul_f64`] (naive).
//!
//! Algorithm sketch. The compiler has turned 1-D operands into 2-D ones and computed each
//! operand's batch strides (0 along broadcast dims), so the output `[batch..., m, n]` is a
//! sequence of independent `m x n` products. The batch index space is walked with the shared
//! odometer (`nd::Layout`, unit dims dropped and contiguous ones merged), and each product is
//! one call of the `gemm` the caller passes: generated code passes the `Kernels` table's entry,
//! so the best SIMD GEMM of the machine does the work without `matmul` being a table entry
//! itself.
//!
//! One case is folded before the walk: when `b` is the same matrix for every batch element
//! (all its batch strides 0) and `a`'s matrices are back to back in batch order, the whole
//! batch is one `gemm` with `batch * m` rows, as a `[B, m, k] x [k, n]` product (a linear layer
//! on a sequence) should be.

use super::nd::{at, contiguous, Layout};
use crate::MatMul;

/// The GEMM signature of [`crate::gemm`] and the `Kernels::gemm` entries: `gemm(m, n, k, a, b,
/// c)` computes `C[m, n] = A[m, k] B[k, n]` (all row-major, contiguous), **overwriting** `C`
/// (every implementation does; `k == 0` writes zeros).
pub type GemmFn = fn(usize, usize, usize, &[f32], &[f32], &mut [f32]);

/// Debug-checks the geometry and the operand lengths.
fn check(p: &MatMul, a_len: usize, b_len: usize, y_len: usize) {
    assert!(
        p.a_strides.len() == p.batch.len() && p.b_strides.len() == p.batch.len(),
        "matmul: batch strides do not match the batch rank {}",
        p.batch.len()
    );
    let batch: usize = p.batch.iter().product();
    let reach = |strides: &[usize], mat: usize| {
        if batch == 0 {
            0
        } else {
            p.batch
                .iter()
                .zip(strides)
                .map(|(&d, &s)| (d - 1) * s)
                .sum::<usize>()
                + mat
        }
    };
    debug_assert!(
        a_len >= reach(p.a_strides, p.m * p.k),
        "matmul: a too short"
    );
    debug_assert!(
        b_len >= reach(p.b_strides, p.k * p.n),
        "matmul: b too short"
    );
    debug_assert!(y_len >= batch * p.m * p.n, "matmul: y too short");
}

/// Calls `f(a_offset, b_offset, y_offset)` for every batch element, in output order.
fn for_each_batch(p: &MatMul, mut f: impl FnMut(usize, usize, usize)) {
    let mut l = Layout::<2>::new(p.batch, |s, d| {
        if s == 0 {
            p.a_strides[d] as isize
        } else {
            p.b_strides[d] as isize
        }
    });
    if l.total() == 0 {
        return;
    }
    l.simplify();
    let mut y = 0;
    let mn = p.m * p.n;
    l.for_each_outer(l.rank, [0, 0], |[oa, ob]| {
        f(at(oa), at(ob), y);
        y += mn;
    });
}

/// numpy `matmul` for `f32` (rank >= 2 after the compiler's 1-D promotion): see [`MatMul`].
/// Each `m x n` output matrix is `gemm(m, n, k, a_matrix, b_matrix, y_matrix)` with the given
/// [`GemmFn`] (pass `Kernels::gemm`); `y` is overwritten.
pub fn matmul(p: &MatMul, a: &[f32], b: &[f32], y: &mut [f32], gemm: GemmFn) {
    check(p, a.len(), b.len(), y.len());
    let (m, k, n) = (p.m, p.k, p.n);
    let batch: usize = p.batch.iter().product();
    if batch == 0 || m == 0 || n == 0 {
        return;
    }
    let a_packed = {
        let c = contiguous(p.batch);
        (0..p.batch.len())
            .all(|d| p.batch[d] == 1 || p.a_strides[d] as isize == c[d] * (m * k) as isize)
    };
    if a_packed
        && p.b_strides
            .iter()
            .zip(p.batch)
            .all(|(&s, &d)| s == 0 || d == 1)
    {
        gemm(
            batch * m,
            n,
            k,
            &a[..batch * m * k],
            &b[..k * n],
            &mut y[..batch * m * n],
        );
        return;
    }
    for_each_batch(p, |oa, ob, oy| {
        gemm(
            m,
            n,
            k,
            &a[oa..oa + m * k],
            &b[ob..ob + k * n],
            &mut y[oy..oy + m * n],
        );
    });
}

/// numpy `matmul` for `f64`, same geometry as [`matmul`]; a plain `i`-`p`-`j` loop (the inner
/// loop runs along contiguous rows of `b` and `y`, so it vectorises).
pub fn matmul_f64(p: &MatMul, a: &[f64], b: &[f64], y: &mut [f64]) {
    check(p, a.len(), b.len(), y.len());
    let (m, k, n) = (p.m, p.k, p.n);
    if m == 0 || n == 0 {
        return;
    }
    for_each_batch(p, |oa, ob, oy| {
        let a = &a[oa..oa + m * k];
        let b = &b[ob..ob + k * n];
        for (i, row) in y[oy..oy + m * n].chunks_exact_mut(n).enumerate() {
            row.fill(0.0);
            for (q, &aiq) in a[i * k..(i + 1) * k].iter().enumerate() {
                for (d, &bv) in row.iter_mut().zip(&b[q * n..(q + 1) * n]) {
                    *d += aiq * bv;
                }
            }
        }
    });
}
