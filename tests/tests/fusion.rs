//! Fusions the compiler makes, checked against onnxruntime and against the same network
//! without them.
//!
//! Residual `add`s fused into the convolution that feeds them (`Residual`, whose GEMM epilogue
//! adds the other operand) match onnxruntime's stored output and the same blocks with every
//! `add` a separate in-place op (`ResidualUnfused`, which the compiler never fuses). Not to the
//! bit: the fused epilogue adds the bias, then the residual, as the two ops did, but a tanh
//! fused into a GEMM epilogue is `Activation::apply` per element while the x86 element-wise
//! kernel has a vector tanh of its own. The fused model gives the same bits with weights
//! embedded and loaded at run time, on one thread and on two. On every ISA (`KILN_ISA`; CI
//! runs this file once per ISA).

use kiln_tests::{assert_close, golden, Residual, ResidualUnfused};

fn bits(y: &[f32]) -> Vec<u32> {
    y.iter().map(|v| v.to_bits()).collect()
}

/// The fusion happened: the fused plan has no `add` left and as many convolutions as the
/// unfused one, while the unfused one keeps all four `add`s.
#[test]
fn residual_adds_are_fused_into_their_convolutions() {
    let count = |plan: &str, op: &str| plan.lines().filter(|l| l.contains(op)).count();
    assert_eq!(count(Residual::PLAN, "= add "), 0, "{}", Residual::PLAN);
    assert_eq!(
        count(ResidualUnfused::PLAN, "= add "),
        4,
        "{}",
        ResidualUnfused::PLAN
    );
    assert_eq!(
        count(Residual::PLAN, "= conv2d "),
        count(ResidualUnfused::PLAN, "= conv2d "),
        "{}",
        Residual::PLAN
    );
}

#[test]
fn fused_residuals_match_onnxruntime_and_the_unfused_network() {
    let g = golden("residual");
    let mut unfused = ResidualUnfused::new();
    let unfused = unfused.run(&g.x).unwrap();
    assert_close(&unfused, &g.y);
    let mut fused = Residual::new();
    let y = fused.run(&g.x).unwrap();
    assert_close(&y, &g.y);
    assert_close(&y, &unfused);
    let want = bits(&y);
    let path = kiln_tests::data_file("residual.safetensors");
    let mut loaded = Residual::from_safetensors(&path).unwrap();
    assert_eq!(bits(&loaded.run(&g.x).unwrap()), want, "loaded at run time");
    loaded.set_threads(2).unwrap();
    assert_eq!(bits(&loaded.run(&g.x).unwrap()), want, "two threads");
}
