//! The residual fusion's rule (`fuse::residual_conv`), on small networks through the whole
//! compiler: which `add`s become the convolution feeding them (printed `residual`) and which
//! stay, because fusing them would be wrong (the conv's result read twice, an activation
//! between, a declared in-place `add_`, broadcasting) or would need an epilogue the kernel does
//! not have (Winograd, depthwise). Their results are checked against onnxruntime in
//! `tests/tests/fusion.rs`; this is the rule itself.

use std::path::{Path, PathBuf};

use kiln_dsl::syntax::NetworkDef;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests")
}

/// The fused graph of a network whose body is `body`, on `x: fm<8xf32[10,10]>` and the
/// `residual` test weights (or `weights`'s).
fn fused(x: &str, weights: &str, out: &str, body: &str) -> String {
    let src =
        format!("net N(x: {x}) -> {out} {{ weights \"data/{weights}.safetensors\"; {body} }}");
    let def: NetworkDef = syn::parse_str(&src).unwrap();
    let c = kiln_dsl::compile(&def, Some(tests_dir())).unwrap_or_else(|e| panic!("{src}: {e}"));
    kiln_dsl::ir::print::print(&c.variants[0].graph)
}

fn residual_net(out: &str, body: &str) -> String {
    fused("fm<8xf32[10,10]>", "residual", out, body)
}

const TWO_CONVS: &str = "let a = conv2d(x, c1: weights<8 -> 1x1xf32 -> 100>, bias = false); \
     let q = conv2d(x, c4: weights<8 -> 1x1xf32 -> 100>, bias = false);";

#[test]
fn an_add_of_a_gemm_convolution_becomes_its_residual() {
    let ir = residual_net(
        "fm<100xf32[10,10]>",
        &format!("{TWO_CONVS} add(a, q).relu()"),
    );
    assert!(!ir.contains("= add("), "{ir}");
    // The later convolution takes the other as its residual, and the ReLU after the add.
    assert!(
        ir.lines()
            .any(|l| l.contains("conv2d(%0, %") && l.contains("residual act=relu")),
        "{ir}"
    );
}

#[test]
fn adds_that_must_stay() {
    let cases = [
        // The convolutions have activations: act(conv) + r is not act(conv + r).
        (
            "fm<100xf32[10,10]>",
            "let a = conv2d(x, c1: weights<8 -> 1x1xf32 -> 100>, bias = false).relu(); \
             let q = conv2d(x, c4: weights<8 -> 1x1xf32 -> 100>, bias = false).relu(); \
             add(a, q)",
        ),
        // Each convolution's result is read again.
        (
            "fm<300xf32[10,10]>",
            &format!("{TWO_CONVS} concat(add(a, q), a, q)"),
        ),
        // Declared in place: the result must be `a`'s bytes.
        (
            "fm<100xf32[10,10]>",
            &format!("{TWO_CONVS} let q = q.relu(); add_(a, q)"),
        ),
        // Broadcasting: the residual is not shaped as the convolution's result.
        (
            "fm<100xf32[10,10]>",
            &format!("{TWO_CONVS} let q = q.relu(); add(a, global_avg_pool(q))"),
        ),
    ];
    for (out, body) in cases {
        let ir = residual_net(out, body);
        assert!(
            ir.contains("= add(") && !ir.contains("residual"),
            "{body}:\n{ir}"
        );
    }
}

#[test]
fn winograd_and_depthwise_convolutions_keep_their_add() {
    let ir = fused(
        "fm<72xf32[28,28]>",
        "wino",
        "fm<72xf32[28,28]>",
        "let a = conv2d(x, c2: weights<72 -> 3x3xf32 -> 72>, pad = 1); add(a, x)",
    );
    assert!(ir.contains("= add(") && !ir.contains("residual"), "{ir}");
    let ir = fused(
        "fm<8xf32[16,16]>",
        "block",
        "fm<16xf32[16,16]>",
        "let e = conv2d(x, expand: weights<8 -> 1x1xf32 -> 16>, bias = false).relu(); \
         let d = conv2d(e, dw: weights<16 -> 3x3xf32 -> 16>, groups = 16, pad = same, \
         bias = false); add(d, e)",
    );
    assert!(ir.contains("= add(") && !ir.contains("residual"), "{ir}");
}
