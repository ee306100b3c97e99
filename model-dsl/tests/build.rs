//! The build.rs driver on files: what `kiln_dsl::Builder` writes for a good model, and the
//! exact messages it renders for broken ones (a `.kiln` file with several mistakes, an ONNX
//! model with unsupported operators, ONNX models whose weights do not fit their input).

use std::path::{Path, PathBuf};

use kiln_dsl::front::onnx_proto as pb;
use kiln_dsl::Builder;
use prost::Message;

fn files() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/files")
}

/// A fresh output directory per test.
fn out_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("build-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn build_one(path: &Path, name: &str) -> Result<String, String> {
    let report = Builder::new()
        .quiet()
        .out_dir(out_dir(name))
        .model(path)
        .compile_each()
        .pop()
        .expect("one report per model");
    report
        .result
        .map(|p| std::fs::read_to_string(p).expect("generated file"))
}

#[test]
fn kiln_file_compiles_and_is_written_once() {
    let path = files().join("good.kiln");
    let out = out_dir("good");
    let b = Builder::new().quiet().out_dir(&out).model(&path);
    b.compile().expect("good.kiln compiles");
    let file = out.join("kiln/good.rs");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("// @generated"));
    assert!(text.contains("struct Good"));
    // Write-if-changed: a second build leaves the file (and its mtime) alone.
    let before = std::fs::metadata(&file).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    b.compile().unwrap();
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        before
    );
}

#[test]
fn broken_kiln_file_renders_every_error_with_its_line() {
    let path = files().join("broken.kiln");
    let err = build_one(&path, "broken").unwrap_err();
    let shown = path.display().to_string();
    let expected = format!(
        "error: unknown operation `max_pol`; did you mean `max_pool`?
 --> {shown}:4:13
  |
4 |     let h = max_pol(h, 2x2);
  |             ^^^^^^^
error: conv2d: input fm<3xf32[8,8]> has 3 channels but weights `c1` expect 4
 --> {shown}:3:35
  |
3 |     let h = conv2d(x, c1: weights<4 -> 3x3xf32 -> 8>, pad = same).relu();
  |                                   ^
"
    );
    assert_eq!(err, expected, "got:\n{err}");
}

fn attr_ints(name: &str, v: &[i64]) -> pb::AttributeProto {
    pb::AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(pb::attribute_proto::AttributeType::Ints as i32),
        ..Default::default()
    }
}

fn value(name: &str, dims: &[i64]) -> pb::ValueInfoProto {
    use pb::tensor_shape_proto::{dimension::Value, Dimension};
    pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::TensorType(pb::type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(pb::TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str]) -> pb::NodeProto {
    pb::NodeProto {
        name: Some(name.into()),
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// Writes a one-graph ONNX model (opset 13) to a temporary file.
fn onnx_file(
    name: &str,
    nodes: Vec<pb::NodeProto>,
    inits: Vec<pb::TensorProto>,
    out_dims: &[i64],
) -> PathBuf {
    let model = pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        graph: Some(pb::GraphProto {
            name: Some(name.into()),
            node: nodes,
            initializer: inits,
            input: vec![value("x", &[1, 3, 8, 8])],
            output: vec![value("y", out_dims)],
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = out_dir(&format!("{name}-src"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.onnx"));
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

fn weights(name: &str, dims: &[i64]) -> pb::TensorProto {
    let n: i64 = dims.iter().product();
    pb::TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(1),
        float_data: (0..n).map(|i| i as f32 * 0.01).collect(),
        ..Default::default()
    }
}

#[test]
fn onnx_lists_every_unsupported_op_at_once() {
    let nodes = vec![
        node("conv_0", "Conv", &["x", "w"], &["a"]),
        node("hard_1", "HardSwish", &["a"], &["b"]),
        node("relu_2", "Relu", &["b"], &["c"]),
        node("shrink_3", "Shrink", &["c"], &["y"]),
    ];
    let path = onnx_file(
        "unsupported",
        nodes,
        vec![weights("w", &[4, 3, 3, 3])],
        &[1, 4, 6, 6],
    );
    let err = build_one(&path, "unsupported").unwrap_err();
    let shown = path.display().to_string();
    assert_eq!(
        err,
        format!(
            "error: {shown}: node \"hard_1\" (HardSwish, #1): unsupported operator `HardSwish`
error: {shown}: node \"shrink_3\" (Shrink, #3): unsupported operator `Shrink`
"
        )
    );
}

#[test]
fn onnx_weights_that_do_not_fit_name_the_node() {
    let mut conv = node("conv_3", "Conv", &["x", "w"], &["y"]);
    conv.attribute.push(attr_ints("pads", &[1, 1, 1, 1]));
    let path = onnx_file(
        "mismatch",
        vec![conv],
        vec![weights("w", &[4, 2, 3, 3])],
        &[1, 4, 8, 8],
    );
    let err = build_one(&path, "mismatch").unwrap_err();
    let shown = path.display().to_string();
    assert_eq!(
        err,
        format!(
            "error: {shown}: node \"conv_3\" (Conv, #0): conv2d: input tensor<f32[1,3,8,8]> has 3 channels but weights `w` expect 2\n"
        ),
    );
}

#[test]
fn onnx_conv_transpose_weights_that_do_not_fit_name_the_node() {
    let mut deconv = node("up_1", "ConvTranspose", &["x", "w"], &["y"]);
    deconv.attribute.push(attr_ints("strides", &[2, 2]));
    let path = onnx_file(
        "deconv",
        vec![deconv],
        vec![weights("w", &[4, 2, 3, 3])],
        &[1, 2, 17, 17],
    );
    let err = build_one(&path, "deconv").unwrap_err();
    let shown = path.display().to_string();
    assert_eq!(
        err,
        format!(
            "error: {shown}: node \"up_1\" (ConvTranspose, #0): conv_transpose: input tensor<f32[1,3,8,8]> has 3 channels but weights `w` expect 4\n"
        ),
    );
}

#[test]
fn onnx_model_compiles_with_its_weights_beside_it() {
    let mut conv = node("conv", "Conv", &["x", "w"], &["a"]);
    conv.attribute.push(attr_ints("pads", &[1, 1, 1, 1]));
    let nodes = vec![conv, node("relu", "Relu", &["a"], &["y"])];
    let path = onnx_file(
        "tiny",
        nodes,
        vec![weights("w", &[4, 3, 3, 3])],
        &[1, 4, 8, 8],
    );
    let text = build_one(&path, "tiny").unwrap();
    assert!(text.contains("pub struct Tiny"));
    let weights = Path::new(env!("CARGO_TARGET_TMPDIR")).join("build-tiny/kiln/tiny.safetensors");
    assert!(weights.is_file());
}

/// Writes an ONNX model with these inputs and outputs (opset 13).
fn onnx_model(
    name: &str,
    inputs: Vec<pb::ValueInfoProto>,
    nodes: Vec<pb::NodeProto>,
    inits: Vec<pb::TensorProto>,
    outputs: Vec<pb::ValueInfoProto>,
) -> PathBuf {
    let model = pb::ModelProto {
        ir_version: Some(8),
        opset_import: vec![pb::OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(13),
        }],
        graph: Some(pb::GraphProto {
            name: Some(name.into()),
            node: nodes,
            initializer: inits,
            input: inputs,
            output: outputs,
            ..Default::default()
        }),
        ..Default::default()
    };
    let dir = out_dir(&format!("{name}-src"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.onnx"));
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

fn int64(name: &str, v: i64) -> pb::TensorProto {
    pb::TensorProto {
        name: Some(name.into()),
        data_type: Some(7),
        int64_data: vec![v],
        ..Default::default()
    }
}

/// A sequence-of-tensors value with element sizes `dims` (`None` leaves the shape out).
fn seq_value(name: &str, dims: Option<&[i64]>) -> pb::ValueInfoProto {
    let mut elem = value("e", dims.unwrap_or(&[])).r#type.unwrap();
    if dims.is_none() {
        if let Some(pb::type_proto::Value::TensorType(t)) = &mut elem.value {
            t.shape = None;
        }
    }
    pb::ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(pb::TypeProto {
            value: Some(pb::type_proto::Value::SequenceType(Box::new(
                pb::type_proto::Sequence {
                    elem_type: Some(Box::new(elem)),
                },
            ))),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A position given as an initializer is checked at compile time; the error names the node.
#[test]
fn onnx_sequence_position_out_of_range_names_the_node() {
    let nodes = vec![
        node("make", "SequenceConstruct", &["x", "x"], &["s"]),
        node("pick", "SequenceAt", &["s", "p"], &["y"]),
    ];
    let path = onnx_model(
        "seqpos",
        vec![value("x", &[2, 3])],
        nodes,
        vec![int64("p", -3)],
        vec![value("y", &[2, 3])],
    );
    let err = build_one(&path, "seqpos").unwrap_err();
    let shown = path.display().to_string();
    assert_eq!(
        err,
        format!("error: {shown}: node \"pick\" (SequenceAt, #1): at: position -3 is out of range for `s`, a sequence of 2 elements (valid positions: -2 to 1)\n")
    );
}

/// ONNX never says how long an input sequence is, nor sizes it leaves symbolic: without the
/// builder's `seq_input`/`input_shape` each is an error saying what to give; with them the
/// model compiles, and `run` takes a `kiln::Seq` of that length.
#[test]
fn onnx_sequence_inputs_take_their_length_from_the_builder() {
    let mut sym = value("x", &[1, 3]);
    if let Some(pb::type_proto::Value::TensorType(t)) = &mut sym.r#type.as_mut().unwrap().value {
        t.shape.as_mut().unwrap().dim[0].value = Some(
            pb::tensor_shape_proto::dimension::Value::DimParam("n".into()),
        );
    }
    let mut n = value("n", &[]);
    if let Some(pb::type_proto::Value::TensorType(t)) = &mut n.r#type.as_mut().unwrap().value {
        t.elem_type = Some(7);
    }
    let nodes = vec![
        node("add", "SequenceInsert", &["s", "x"], &["t"]),
        node("len", "SequenceLength", &["t"], &["n"]),
    ];
    let path = onnx_model(
        "seqin",
        vec![seq_value("s", None), sym],
        nodes,
        vec![],
        vec![seq_value("t", Some(&[2, 3])), n],
    );
    let shown = path.display().to_string();
    let err = build_one(&path, "seqin").unwrap_err();
    assert_eq!(
        err,
        format!(
            "error: {shown}: input \"s\": a sequence input: ONNX does not say how many elements it has; give the number with `Builder::seq_input(\"s\", n)`
error: {shown}: input \"s\": its elements' shape is not given; kiln compiles for known sizes: give them with `Builder::input_shape(\"s\", &[...])` (or set them with onnx.tools.update_model_dims)
error: {shown}: input \"x\": its sizes [?, 3] are not all known; kiln compiles for known sizes: give them with `Builder::input_shape(\"x\", &[...])` (or set them with onnx.tools.update_model_dims)
"
        )
    );
    let compile = |x: &[usize]| {
        Builder::new()
            .quiet()
            .out_dir(out_dir("seqin"))
            .model(&path)
            .seq_input("s", 2)
            .input_shape("s", &[2, 3])
            .input_shape("x", x)
            .compile_each()
            .pop()
            .unwrap()
            .result
            .map(|p| std::fs::read_to_string(p).unwrap())
    };
    let text = compile(&[2, 3]).unwrap();
    assert!(text.contains("Seq"), "{text}");
    // A size the model states must agree with the builder's.
    let err = compile(&[2, 4]).unwrap_err();
    assert!(
        err.contains(
            "input \"x\": the builder gives the sizes [2, 4] but the model declares [?, 3]"
        ),
        "{err}"
    );
}
