//! The reference GEMMs the benchmark compares kiln against: `matrixmultiply::sgemm` and the
//! `gemm` crate, both single-threaded (matrixmultiply's `threading` feature is off, `gemm` gets
//! `Parallelism::None`), both with their own run-time ISA detection.
//!
//! Both take raw pointers and strides; these wrappers give them kiln's slice signature
//! (row-major, contiguous, `C` overwritten) and check the lengths first, so every pointer they
//! pass covers the elements the strides address.

/// kiln's GEMM signature: `f(m, n, k, a, b, c)`.
pub type GemmFn = fn(usize, usize, usize, &[f32], &[f32], &mut [f32]);

/// The crates, in the order their lines are printed.
pub const CRATES: [(&str, GemmFn); 2] = [("matrixmultiply", matrixmultiply), ("gemm", gemm_crate)];

/// `C[m, n] = A[m, k] B[k, n]` with `matrixmultiply::sgemm`.
fn matrixmultiply(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    // SAFETY: the assert above guarantees the three slices hold the `m x k`, `k x n` and
    // `m x n` row-major matrices the strides (row stride = width, column stride = 1) address;
    // `c` is exclusively borrowed and `beta = 0` means its old contents are never read.
    unsafe {
        matrixmultiply::sgemm(
            m,
            k,
            n,
            1.0,
            a.as_ptr(),
            k as isize,
            1,
            b.as_ptr(),
            n as isize,
            1,
            0.0,
            c.as_mut_ptr(),
            n as isize,
            1,
        );
    }
}

/// `C[m, n] = A[m, k] B[k, n]` with `gemm::gemm` (`dst = alpha dst + beta lhs rhs`, with
/// `read_dst = false` so `alpha` is ignored).
fn gemm_crate(m: usize, n: usize, k: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
    assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
    // SAFETY: as for `matrixmultiply`: the lengths are checked above and the strides
    // (column stride 1, row stride = width) stay inside each row-major matrix; `T = f32` is
    // one of the types `gemm` supports, so it does not panic.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            1,
            n as isize,
            0.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}
