//! Regenerates model-dsl/src/front/onnx_proto.rs from the onnx pip package's onnx.proto with
//! prost-build (needs `protoc`); run by scripts/gen_onnx_proto.sh.
fn main() {
    let proto = std::env::args().nth(1).expect("path to onnx.proto");
    let out = std::env::args().nth(2).expect("out dir");
    let dir = std::path::Path::new(&proto).parent().unwrap().to_path_buf();
    prost_build::Config::new().out_dir(out).compile_protos(&[proto.as_str()], &[dir]).unwrap();
}
