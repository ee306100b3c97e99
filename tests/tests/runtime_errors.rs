//! Wrong input at run time is an `Err` whose message says what was expected.

use kiln_tests::{data_file, golden, LeNet, Mlp};

fn message<T>(r: Result<T, kiln::Error>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn wrong_input_length() {
    let mut model = Mlp::new();
    let msg = message(model.run(&[0.0f32; 59][..]));
    assert!(
        msg.contains("`x`") && msg.contains("60") && msg.contains("59"),
        "{msg}"
    );
}

#[test]
fn misaligned_input_bytes() {
    let g = golden("mlp");
    let mut model = Mlp::new();
    let mut bytes = vec![0u8; g.x.len() * 4 + 1];
    let start = if (bytes.as_ptr() as usize).is_multiple_of(4) {
        1
    } else {
        0
    };
    let msg = message(model.run(&bytes[start..start + g.x.len() * 4]));
    assert!(msg.contains("4-byte boundary"), "{msg}");
    bytes.clear();
}

#[test]
fn arena_too_small() {
    let model = LeNet::new();
    let mut arena = vec![0u8; 100];
    let msg = message(model.run_in(&mut arena, &[0.0f32; 784][..]));
    assert!(msg.contains(&LeNet::ARENA_BYTES.to_string()), "{msg}");
}

#[test]
fn truncated_weights() {
    let bytes = data_file("lenet.safetensors");
    let msg = message(LeNet::from_safetensors(&bytes[..bytes.len() / 2]));
    assert!(msg.contains("weights"), "{msg}");
}

#[test]
fn garbage_weights() {
    let msg = message(LeNet::from_safetensors(
        b"definitely not a safetensors file",
    ));
    assert!(msg.contains("weights"), "{msg}");
}

#[test]
fn weights_of_another_network() {
    // The MLP's file has `fc1.weight`, but shaped [32, 20] instead of LeNet's [120, 400], and no
    // `conv1.weight` at all.
    let msg = message(LeNet::from_safetensors(&data_file("mlp.safetensors")));
    assert!(
        msg.contains("conv1.weight") || msg.contains("fc1.weight"),
        "{msg}"
    );
    assert!(
        msg.contains("[6, 1, 5, 5]") || msg.contains("[120, 400]"),
        "{msg}"
    );
}

// 4 TiB of weights: a fallible constructor reports it instead of aborting. (64-bit targets only:
// on 32-bit ones the sizes do not fit `usize` at all.)
#[cfg(target_pointer_width = "64")]
kiln::network! {
    net Huge(x: vec<1048576xf32>) -> vec<1048576xf32> {
        dense(x, fc: weights<1048576 -> 1048576>)
    }
}

#[cfg(target_pointer_width = "64")]
#[test]
fn a_model_too_large_to_allocate_is_an_err() {
    match Huge::from_safetensors(&[]) {
        Ok(_) => panic!("allocated 4 TiB?"),
        Err(e) => assert!(
            matches!(e, kiln::Error::OutOfMemory { .. }),
            "expected OutOfMemory, got {e}"
        ),
    }
}
