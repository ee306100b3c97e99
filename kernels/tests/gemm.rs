//! Every ISA's `gemm` and `dense` against the portable reference on random shapes.
//!
//! Shapes are drawn so that every edge of the blocked kernels is hit: `m`, `n` and `k` that are
//! not multiples of any register or cache block (row slivers with 1..MR rows, the ragged
//! columns computed as dot products, several depth blocks with a short last one), and
//! degenerate sizes (`k = 0`, single rows and columns). `dense` also runs every activation and
//! both its small-batch (dot product) and large-batch (packed GEMM) paths. Results must match
//! `PORTABLE` to a relative 1e-4: the accumulation order differs between implementations, the
//! arithmetic does not.

mod common;

use kiln_kernels::{Activation, PORTABLE};
use proptest::prelude::*;

/// Deterministic data in [-1, 1) from a seed (a small LCG: proptest picks the seed).
fn data(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// `got` matches `want` to 1e-4 relative to `max(|want|, 1)`; NaN must match NaN.
fn close(got: &[f32], want: &[f32], what: &str) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        if w.is_nan() {
            prop_assert!(g.is_nan(), "{}: [{}] got {} want NaN", what, i, g);
        } else {
            let tol = 1e-4 * w.abs().max(1.0);
            prop_assert!(
                (g - w).abs() <= tol,
                "{}: [{}] got {} want {}",
                what,
                i,
                g,
                w
            );
        }
    }
    Ok(())
}

use common::ACTS;

/// Sizes weighted towards the edges of the blocking: small, around one block, and past it.
fn dim(max: usize) -> impl Strategy<Value = usize> {
    prop_oneof![1..=20usize, 1..=max, Just(0)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn gemm_matches_portable(m in dim(40), n in dim(230), k in dim(300), seed in any::<u64>()) {
        let a = data(m * k, seed);
        let b = data(k * n, seed ^ 1);
        // One extra element past C's end must survive untouched.
        let mut want = vec![7.0f32; m * n + 1];
        (PORTABLE.gemm)(m, n, k, &a, &b, &mut want);
        for kt in common::isas("gemm") {
            let mut got = vec![7.0f32; m * n + 1];
            (kt.gemm)(m, n, k, &a, &b, &mut got);
            close(&got, &want, &format!("{:?} gemm {m}x{n}x{k}", kt.isa))?;
        }
    }

    #[test]
    fn dense_matches_portable(
        // Both paths: dot products below 32 rows, the packed GEMM from 32.
        batch in prop_oneof![1..=4usize, 1..=20usize, 30..=45usize],
        n_in in dim(300),
        n_out in dim(70),
        with_bias in any::<bool>(),
        act in 0..ACTS.len(),
        seed in any::<u64>(),
    ) {
        let x = data(batch * n_in, seed);
        let w = data(n_out * n_in, seed ^ 1);
        let bias = data(n_out, seed ^ 2);
        let bias = with_bias.then_some(&bias[..]);
        let act = ACTS[act];
        let mut want = vec![7.0f32; batch * n_out + 1];
        (PORTABLE.dense)(batch, n_in, n_out, &x, &w, bias, act, &mut want);
        for kt in common::isas("dense") {
            let mut got = vec![7.0f32; batch * n_out + 1];
            (kt.dense)(batch, n_in, n_out, &x, &w, bias, act, &mut got);
            close(&got, &want, &format!("{:?} dense b{batch} {n_in}->{n_out} {act:?}", kt.isa))?;
        }
    }
}

/// Sizes that cross several depth blocks and column panels, beyond what the random cases
/// reach cheaply. The x86 GEMM packs wider panels when a depth block of `A` exceeds half the
/// L2: 1100 x 250 floats (two blocks of 250) is 1.1 MB, past that on any L2 up to 2 MiB, and
/// 530 columns are one wide panel and a ragged one. Short products with more rows than depth
/// (`k <= 128 < m`) take wide panels too: 1100 columns are two wide panels and a ragged 76
/// (two full tiles and a dot-product rest on AVX-512), at depths on both sides of the
/// boundary, with slivers whose row tail is balanced (100 = 7 x 12 + 8 + 8). Cores with 48 KiB
/// of L1d cut a `k` of 385-512 into one block, not two, and 1024 into two.
#[test]
fn gemm_large_shapes_match_portable() {
    for (m, n, k) in [
        (13, 401, 600),
        (70, 49, 520),
        (7, 196, 1030),
        (25, 17, 3),
        (1100, 530, 500),
        (100, 1100, 64),
        (129, 1100, 128),
        (130, 1100, 129),
        (40, 530, 3),
        // One 450-deep block and two 512-deep ones where the L1d takes deep blocks
        // (48 KiB, as on Zen 5), blocks of 225 and 342 elsewhere.
        (50, 300, 450),
        (30, 100, 1024),
        // Two 350-deep blocks on any core, 1.5 MB of `A` each: wide panels.
        (1100, 530, 700),
    ] {
        let a = data(m * k, 3);
        let b = data(k * n, 4);
        let mut want = vec![0.0f32; m * n];
        (PORTABLE.gemm)(m, n, k, &a, &b, &mut want);
        for kt in common::isas("gemm large") {
            let mut got = vec![0.0f32; m * n];
            (kt.gemm)(m, n, k, &a, &b, &mut got);
            close(&got, &want, &format!("{:?} gemm {m}x{n}x{k}", kt.isa)).unwrap();
        }
    }
}

/// Sizes whose products wrap (`2^63 * 2 == 0` in `usize`) must be refused by the length
/// checks, not pass them and send the micro-kernels outside empty slices (`B` is long enough,
/// so only the checks of `A` and `C`, which the micro-kernels read through raw pointers, can
/// stop these calls).
#[test]
fn wrapped_sizes_are_refused() {
    const HUGE: usize = 1 << (usize::BITS - 1);
    for kt in common::isas("wrapped sizes") {
        assert!(
            common::refused_as_short(|| (kt.gemm)(HUGE, 2, 2, &[], &[0.0; 4], &mut [])),
            "{}: gemm accepted a wrapped m * k",
            kt.isa
        );
        assert!(
            common::refused_as_short(|| {
                (kt.dense)(HUGE, 2, 2, &[], &[0.0; 4], None, Activation::None, &mut [])
            }),
            "{}: dense accepted a wrapped batch * n_in",
            kt.isa
        );
    }
}
