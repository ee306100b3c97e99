//! Memory-plan facts for every test network: the planned arena lies between the lower bound
//! (the most bytes live at one step) and the naive sum of all intermediates, and it reaches
//! the lower bound on LeNet and on the residual block. The verifier ran when each network
//! compiled; these check what it proved is also what the generated type reports.

use kiln_tests::{Block, Digits32, LeNet, Mlp};

fn check(name: &str, arena: usize, lower: usize, naive: usize, plan: &str) {
    println!("{name}: arena {arena} B, lower bound {lower} B, naive {naive} B\n{plan}");
    assert!(
        lower <= arena,
        "{name}: arena {arena} below the lower bound {lower}"
    );
    assert!(
        arena <= naive,
        "{name}: arena {arena} above the naive sum {naive}"
    );
    assert_eq!(arena % 64, 0, "{name}: arena size not 64-byte aligned");
    assert!(lower > 0);
}

#[test]
fn mlp_plan() {
    check(
        "mlp",
        Mlp::ARENA_BYTES,
        Mlp::ARENA_LOWER_BOUND,
        Mlp::ARENA_NAIVE_BYTES,
        Mlp::PLAN,
    );
}

#[test]
fn digits_plan() {
    check(
        "digits",
        Digits32::ARENA_BYTES,
        Digits32::ARENA_LOWER_BOUND,
        Digits32::ARENA_NAIVE_BYTES,
        Digits32::PLAN,
    );
}

#[test]
fn lenet_plan_is_optimal() {
    check(
        "lenet",
        LeNet::ARENA_BYTES,
        LeNet::ARENA_LOWER_BOUND,
        LeNet::ARENA_NAIVE_BYTES,
        LeNet::PLAN,
    );
    assert_eq!(LeNet::ARENA_BYTES, LeNet::ARENA_LOWER_BOUND);
}

#[test]
fn block_plan_is_optimal() {
    check(
        "block",
        Block::ARENA_BYTES,
        Block::ARENA_LOWER_BOUND,
        Block::ARENA_NAIVE_BYTES,
        Block::PLAN,
    );
    assert_eq!(Block::ARENA_BYTES, Block::ARENA_LOWER_BOUND);
}

/// Hand-computed for LeNet (f32, 64-byte aligned sizes): the largest step is conv1, which holds
/// its 5x5 im2col scratch (25 x 28 x 28 floats = 78400 B) and its output (6 x 28 x 28 floats =
/// 18816 B); the input is the caller's and takes no arena bytes.
#[test]
fn lenet_lower_bound_by_hand() {
    assert_eq!(LeNet::ARENA_LOWER_BOUND, 78_400 + 18_816);
}
