//! What both kiln halves of `scripts/bench_e2e.py` (`bench_e2e` and `bench_cold`) read from
//! the script's `io.safetensors` files and how they compare kiln's output with onnxruntime's.

use std::error::Error;

use safetensors::SafeTensors;

/// The little-endian `f32`s of a tensor; safetensors data has no alignment guarantee, so it
/// is decoded rather than cast.
pub fn tensor(file: &SafeTensors, name: &str) -> Result<Vec<f32>, Box<dyn Error>> {
    Ok(file
        .tensor(name)?
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// `max |got - want|` and `max |want|`; a NaN anywhere in `got` counts as infinitely far.
pub fn max_diff(got: &[f32], want: &[f32]) -> (f32, f32) {
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    let diff = got.iter().zip(want).fold(0.0f32, |m, (g, w)| {
        let d = (g - w).abs();
        if d.is_nan() {
            f32::INFINITY
        } else {
            m.max(d)
        }
    });
    (diff, scale)
}

/// The benchmark's tolerance: kiln matches when no output is further from onnxruntime's
/// than 1e-3 of the largest |output| (and the lengths agree).
pub fn matches(got: &[f32], want: &[f32]) -> bool {
    let (diff, scale) = max_diff(got, want);
    got.len() == want.len() && diff <= 1e-3 * scale
}
