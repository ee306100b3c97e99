//! One network, precompiled for three input sizes.
//!
//! `where (h, w) in [...]` makes kiln infer, plan and verify one full variant per listed size at
//! compile time. `run` picks the variant from the input's shape (a `kiln::Tensor` carries it;
//! a plain slice is matched by its length), switching allocates nothing, and a size that was not
//! listed is an `Err` naming the sizes the model has.
//!
//! Run with `cargo run --release --example shapes`.

use kiln::Tensor;

kiln::network! {
    /// A small conv net over images of three sizes.
    pub net Det(x: tensor<f32[1, 3, h, w]>) -> fm<4xf32[1, 1]>
    where (h, w) in [8x8, 12x12, (16, 10)]
    {
        weights "data/multishape.safetensors";
        let a = conv2d(x, c1: weights<3 -> 3x3xf32 -> 8>, pad = 1).relu();
        let a = max_pool(a, 2x2, stride = 2);
        let a = conv2d(a, c2: weights<8 -> 3x3xf32 -> 4>, pad = 1);
        global_avg_pool(a)
    }
}

fn main() {
    let mut model = Det::new();
    println!(
        "Det: {} variants, arena {} bytes (the largest variant's)",
        Det::VARIANTS.len(),
        Det::ARENA_BYTES
    );
    for (k, label) in Det::VARIANTS.iter().enumerate() {
        let shape = Det::VARIANT_INPUT_SHAPES[k][0];
        // A deterministic test image: a ramp over the pixels.
        let n: usize = shape.iter().product();
        let x: Vec<f32> = (0..n).map(|i| (i % 17) as f32 / 17.0 - 0.5).collect();
        let y = model.run(&Tensor::new(&x, shape)).expect("a listed shape");
        let input = format!("{shape:?}");
        println!(
            "  variant {label:<16} input {input:<16} arena {:>6} bytes  output {:?}",
            Det::VARIANT_ARENA_BYTES[k],
            y.as_slice()
        );
    }
    let x = vec![0.0f32; 3 * 20 * 20];
    match model.run(&Tensor::new(&x, &[1, 3, 20, 20])) {
        Ok(_) => println!("unexpected: an unlisted shape ran"),
        Err(e) => println!("an unlisted shape: {e}"),
    }
}
