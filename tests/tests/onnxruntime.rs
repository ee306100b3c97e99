//! kiln's outputs against onnxruntime's on the same networks and weights
//! (`scripts/gen_testdata.py` and `scripts/train_digits.py` made the reference files).

use kiln_tests::{
    assert_close, golden, Block, Blocked, Deep, Digits32, LeNet, Mlp, Wino, WinoWide,
};

#[test]
fn mlp_matches_onnxruntime() {
    let g = golden("mlp");
    let mut model = Mlp::new();
    let y = model.run(&g.x).unwrap();
    assert_eq!(y.shape(), g.y_shape.as_slice());
    assert_close(&y, &g.y);
}

#[test]
fn lenet_matches_onnxruntime() {
    let g = golden("lenet");
    let mut model = LeNet::new();
    let y = model.run(&g.x).unwrap();
    assert_eq!(y.shape(), g.y_shape.as_slice());
    assert_close(&y, &g.y);
}

#[test]
fn block_matches_onnxruntime() {
    let g = golden("block");
    let mut model = Block::new();
    let y = model.run(&g.x).unwrap();
    assert_eq!(y.shape(), g.y_shape.as_slice());
    assert_close(&y, &g.y);
}

/// The Winograd path (filters transformed after the batch-norm fold, ragged tiles, fused
/// epilogues) within the same tolerance as every other network, under whichever ISA
/// `KILN_ISA` selects (CI runs the suite per ISA).
#[test]
fn winograd_convolutions_match_onnxruntime() {
    assert_eq!(
        Wino::PLAN.matches("winograd F(4x4,3x3)").count(),
        2,
        "both convolutions should run as Winograd:\n{}",
        Wino::PLAN
    );
    let g = golden("wino");
    let mut model = Wino::new();
    let y = model.run(&g.x).unwrap();
    assert_eq!(y.shape(), g.y_shape.as_slice());
    assert_close(&y, &g.y);
    // Run-time weights go through the same preparation (fold, then transform).
    let mut model = Wino::from_safetensors(&kiln_tests::data_file("wino.safetensors")).unwrap();
    assert_close(&model.run(&g.x).unwrap(), &g.y);
}

/// A Winograd layer whose algorithm the CPU decides (ResNet-50's 256 -> 256 at 14x14): the
/// run takes Winograd or im2col + GEMM by `Kernels::few_tiles_winograd` (CI runs this file
/// with `KILN_FEW_TILES=im2col` and under `KILN_ISA=avx2`, which takes Winograd), with weights
/// embedded and loaded at run time (both preparations made then).
#[test]
fn few_tile_winograd_layers_match_onnxruntime_either_way() {
    assert!(
        WinoWide::PLAN.contains("winograd F(4x4,3x3) or im2col + gemm, by CPU"),
        "{}",
        WinoWide::PLAN
    );
    let g = golden("wino_wide");
    let mut model = WinoWide::new();
    let y = model.run(&g.x).unwrap();
    assert_eq!(y.shape(), g.y_shape.as_slice());
    assert_close(&y, &g.y);
    let bytes = kiln_tests::data_file("wino_wide.safetensors");
    let mut model = WinoWide::from_safetensors(&bytes).unwrap();
    assert_close(&model.run(&g.x).unwrap(), &g.y);
}

/// The blocked channel layout: the compiler plans `Blocked` a second time with its six
/// convolutions in NCHW16c (the 64 -> 32 one through the blocked Winograd convolution, the
/// others direct), and `run` takes that plan where the kernel table's blocked
/// convolution is the faster (AVX-512), or wherever `KILN_LAYOUT=blocked` says (CI runs this
/// file so on every ISA). Every way matches onnxruntime, with weights embedded (packed at
/// compile time) and loaded at run time (packed then), and two threads (the blocked
/// convolutions split by output rows) give the same bits as one.
#[test]
fn blocked_layout_matches_onnxruntime() {
    let (_, blocked) = Blocked::PLAN
        .split_once("blocked convolutions (NCHW16c):\n")
        .expect("a blocked plan");
    let convs: Vec<&str> = blocked
        .lines()
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(
        convs.len(),
        6,
        "every convolution blocked:\n{}",
        Blocked::PLAN
    );
    assert_eq!(
        convs
            .iter()
            .filter(|l| l.ends_with("(winograd F(4x4,3x3))"))
            .count(),
        5,
        "the stride-1 convolutions through Winograd:\n{}",
        Blocked::PLAN
    );
    let g = golden("blocked");
    let mut model = Blocked::new();
    let y = model.run(&g.x).unwrap();
    assert_eq!(y.shape(), g.y_shape.as_slice());
    assert_close(&y, &g.y);
    let path = kiln_tests::data_file("blocked.safetensors");
    let mut model = Blocked::from_safetensors(&path).unwrap();
    let one: Vec<u32> = model
        .run(&g.x)
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    model.set_threads(2).unwrap();
    let y = model.run(&g.x).unwrap();
    assert_close(&y, &g.y);
    let two: Vec<u32> = y.iter().map(|v| v.to_bits()).collect();
    assert_eq!(one, two, "two threads changed the result");
}

/// Weights stored pre-packed (`kiln_kernels::pack`): embedded (prepared at compile time, read
/// in place or converted for the table `new` picks) and loaded at run time (packed then).
#[test]
fn packed_weights_match_onnxruntime() {
    let g = golden("deep");
    let mut model = Deep::new();
    let y = model.run(&g.x).unwrap();
    assert_eq!(y.shape(), g.y_shape.as_slice());
    assert_close(&y, &g.y);
    let mut model = Deep::from_safetensors(&kiln_tests::data_file("deep.safetensors")).unwrap();
    assert_close(&model.run(&g.x).unwrap(), &g.y);
}

#[test]
fn trained_digits_matches_onnxruntime() {
    let g = golden("digits");
    let mut model = Digits32::new();
    let y = model.run(&g.x).unwrap();
    assert_eq!(y.shape(), g.y_shape.as_slice());
    assert_close(&y, &g.y);
}

/// Weights given at run time go through the validating loader and must give the same numbers
/// as the embedded ones.
#[test]
fn weights_loaded_at_run_time_match() {
    let g = golden("block");
    let mut model = Block::from_safetensors(&kiln_tests::data_file("block.safetensors")).unwrap();
    assert_close(&model.run(&g.x).unwrap(), &g.y);
    // The embedded weights were folded at compile time by the same kernels functions that fold
    // these at load time: the outputs are the same to the bit.
    let loaded = model.run(&g.x).unwrap().as_slice().to_vec();
    let mut embedded = Block::new();
    assert_eq!(embedded.run(&g.x).unwrap().as_slice(), &loaded[..]);
}

/// A caller-owned arena, misaligned on purpose, gives the same result as the model's own.
#[test]
fn run_in_a_caller_arena() {
    let g = golden("lenet");
    let model = LeNet::new();
    let mut arena = vec![0u8; LeNet::ARENA_BYTES + 64 + 3];
    let y = model.run_in(&mut arena[3..], &g.x).unwrap();
    assert_close(&y, &g.y);
}

/// Inputs as little-endian bytes are viewed without copying.
#[test]
fn input_as_bytes() {
    let g = golden("mlp");
    let mut model = Mlp::new();
    let mut bytes = kiln::Arena::new(g.x.len() * 4);
    for (chunk, v) in bytes.as_bytes_mut().chunks_exact_mut(4).zip(&g.x) {
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    let y = model.run(bytes.as_bytes_mut() as &[u8]).unwrap();
    assert_close(&y, &g.y);
}
