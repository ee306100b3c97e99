//! Runs the two models the build script compiled, a `.kiln` file and an ONNX export, on the
//! inputs stored beside them and checks each result against onnxruntime's
//! (`scripts/gen_testdata.py` made the reference files): `cargo run -p kiln-build-example`.

use safetensors::SafeTensors;

kiln::include_model!("mlp"); // `pub net Mlp` in models/mlp.kiln
kiln::include_model!("lenet"); // models/lenet.onnx: the type is the file stem in CamelCase

/// The reference input `x` and output `y` stored in `models/<name>_io.safetensors`.
fn reference(name: &str) -> Result<(Vec<f32>, Vec<f32>), String> {
    let path = format!(
        "{}/models/{name}_io.safetensors",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).map_err(|e| format!("{path}: {e}"))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| format!("{path}: {e}"))?;
    let read = |key: &str| -> Result<Vec<f32>, String> {
        let t = st.tensor(key).map_err(|e| format!("{path}: {key}: {e}"))?;
        Ok(t.data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    };
    Ok((read("x")?, read("y")?))
}

/// The largest difference from the reference, or an error when it is above the tolerance.
fn check(name: &str, got: &[f32], want: &[f32]) -> Result<f32, String> {
    if got.len() != want.len() {
        return Err(format!(
            "{name}: {} values, expected {}",
            got.len(),
            want.len()
        ));
    }
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f32, f32::max);
    if worst > 1e-4 {
        return Err(format!("{name}: differs from onnxruntime by {worst}"));
    }
    Ok(worst)
}

fn main() -> Result<(), String> {
    let (x, y) = reference("mlp")?;
    let mut mlp = Mlp::new();
    let out = mlp.run(&x).map_err(|e| e.to_string())?;
    let d = check("mlp", out.as_slice(), &y)?;
    println!(
        "mlp (models/mlp.kiln): output {:?}, max |kiln - onnxruntime| = {d:.2e}, arena {} bytes",
        out.shape(),
        Mlp::ARENA_BYTES
    );
    print!("{}", Mlp::PLAN);

    let (x, y) = reference("lenet")?;
    let mut lenet = Lenet::new();
    let out = lenet.run(&x).map_err(|e| e.to_string())?;
    let d = check("lenet", out.as_slice(), &y)?;
    println!(
        "lenet (models/lenet.onnx): output {:?}, class {:?}, max |kiln - onnxruntime| = {d:.2e}, arena {} bytes",
        out.shape(),
        out.argmax(),
        Lenet::ARENA_BYTES
    );
    print!("{}", Lenet::PLAN);
    Ok(())
}
