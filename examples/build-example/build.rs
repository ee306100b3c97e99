//! The whole build script of a crate that compiles model files: one builder call. A mistake in
//! either model fails the build with the rendered messages (`path:line:col` for the `.kiln`
//! file, the node for the ONNX model).

fn main() -> Result<(), kiln_dsl::build::BuildError> {
    kiln_dsl::Builder::new()
        .model("models/mlp.kiln")
        .model("models/lenet.onnx")
        .compile()
}
