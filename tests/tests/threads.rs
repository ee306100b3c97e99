//! Several threads (`set_threads`): the outputs still match onnxruntime's stored ones, and are
//! the same to the bit as on one thread (the kernels split only whole parts of their outputs,
//! each computed exactly as on one thread).

use kiln_tests::{assert_close, golden, Block, Deep, DeepWide, Wino};

fn bits(y: &[f32]) -> Vec<u32> {
    y.iter().map(|v| v.to_bits()).collect()
}

/// Winograd layers large enough to be split (36 products per block on the workers).
#[test]
fn winograd_on_two_threads_matches_onnxruntime() {
    let g = golden("wino");
    let mut one = Wino::new();
    let want = bits(&one.run(&g.x).unwrap());
    let mut model = Wino::new();
    model.set_threads(2).unwrap();
    assert_eq!(model.threads(), 2);
    for _ in 0..3 {
        let y = model.run(&g.x).unwrap();
        assert_close(&y, &g.y);
        assert_eq!(bits(&y), want, "two threads differ from one");
    }
    // Back to one thread (the workers are joined).
    model.set_threads(1).unwrap();
    assert_eq!(model.threads(), 1);
    assert_eq!(bits(&model.run(&g.x).unwrap()), want);
}

/// Networks too small to split still run (serially) with threads on.
#[test]
fn small_networks_on_three_threads_match_onnxruntime() {
    let g = golden("block");
    let mut model = Block::new();
    model.set_threads(3).unwrap();
    assert_close(&model.run(&g.x).unwrap(), &g.y);
    let g = golden("deep");
    let mut model = Deep::new();
    model.set_threads(3).unwrap();
    assert_close(&model.run(&g.x).unwrap(), &g.y);
}

/// Pointwise, im2col and grouped convolutions split among workers: the same bits as one
/// thread (the kernel harness `kernels/tests/par.rs` checks them against the portable kernel).
#[test]
fn gemm_convolutions_on_two_threads_match_one_thread() {
    let x: Vec<f32> = (0..8 * 112 * 112)
        .map(|i| ((i * 37 % 101) as f32) / 50.0 - 1.0)
        .collect();
    let mut one = DeepWide::new();
    let want = bits(&one.run(&x).unwrap());
    let mut model = DeepWide::new();
    model.set_threads(2).unwrap();
    for _ in 0..2 {
        assert_eq!(bits(&model.run(&x).unwrap()), want);
    }
}

/// `run_in` from two threads on one model with workers: one job at a time uses the pool, the
/// other runs on its own thread; both are right.
#[test]
fn run_in_from_two_threads_shares_the_pool() {
    let g = golden("wino");
    let mut model = Wino::new();
    model.set_threads(2).unwrap();
    let want = bits(&Wino::new().run(&g.x).unwrap());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut arena = kiln::Arena::new(Wino::ARENA_BYTES);
                for _ in 0..4 {
                    let y = model.run_in(arena.as_bytes_mut(), &g.x).unwrap();
                    assert_eq!(bits(&y), want);
                }
            });
        }
    });
}
