//! kiln's main job on a bundled example: a small CNN trained on scikit-learn's 8x8 digits
//! (`scripts/train_digits.py`), compiled by `kiln::network!`, run over the held-out test set.
//!
//! Prints the accuracy, the median latency per image and the arena the compiler planned.
//!
//! ```text
//! cargo run --release --example digits
//! ```

use std::time::Instant;

use safetensors::SafeTensors;

kiln::network! {
    /// Classifies one 8x8 digit: pixel values 0..=16 scaled to 0..=1.
    pub net Digits(x: fm<1xf32[8,8]>) -> vec<10xf32> {
        weights "data/digits.safetensors";
        let h = conv2d(x, conv1: weights<1 -> 3x3xf32 -> 16>, pad = same).relu();
        let h = max_pool(h, 2x2, stride = 2);
        let h = dense(flatten(h), fc1: weights<256 -> 64>).relu();
        softmax(dense(h, fc2: weights<64 -> 10>))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/digits/data/test.safetensors"
    );
    let file = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let test = SafeTensors::deserialize(&file)?;
    let images = test.tensor("images")?;
    let labels = test.tensor("labels")?.data();
    let pixels = images.data();
    let n = labels.len();
    if images.shape() != [n, 64] {
        return Err(format!(
            "{path}: `images` has shape {:?}, expected [{n}, 64]",
            images.shape()
        )
        .into());
    }

    let mut model = Digits::new();
    let inputs: Vec<[f32; 64]> = pixels
        .chunks_exact(64)
        .map(|img| std::array::from_fn(|i| f32::from(img[i]) / 16.0))
        .collect();

    let mut correct = 0;
    for (x, &label) in inputs.iter().zip(labels) {
        let probs = model.run(x)?;
        if probs.argmax() == Some(usize::from(label)) {
            correct += 1;
        }
    }

    // Latency: every image timed on its own, 20 passes over the set; the median resists the
    // noise of a shared machine.
    let mut times = Vec::with_capacity(20 * n);
    for _ in 0..20 {
        for x in &inputs {
            let start = Instant::now();
            let probs = model.run(x)?;
            std::hint::black_box(probs.as_slice());
            times.push(start.elapsed());
        }
    }
    times.sort();
    let median = times[times.len() / 2];

    let accuracy = 100.0 * correct as f64 / n as f64;
    println!("digits: {correct}/{n} held-out images correct, accuracy {accuracy:.2}%");
    println!(
        "median latency per image: {:.2} µs",
        median.as_secs_f64() * 1e6
    );
    println!(
        "arena: {} bytes (lower bound {}, no reuse {}), parameters: {} f32",
        Digits::ARENA_BYTES,
        Digits::ARENA_LOWER_BOUND,
        Digits::ARENA_NAIVE_BYTES,
        Digits::PARAMS_LEN
    );
    if accuracy < 95.0 {
        return Err(format!("accuracy {accuracy:.2}% is below 95%").into());
    }
    Ok(())
}
