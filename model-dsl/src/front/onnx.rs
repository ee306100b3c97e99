//! The ONNX front end: an ONNX model (protobuf, decoded with prost) becomes an untyped
//! [`Graph`] directly, the same IR the DSL front end builds, so every shape rule, fold, plan and
//! check below is shared (no detour through DSL tokens).
//!
//! What is constant at compile time is folded here, never emitted: initializers, `Constant`,
//! `ConstantOfShape`, and the `Shape` → `Gather` → `Concat` → `Reshape` chains exporters write
//! (a `Shape` asks inference for the shape of what has been built so far). A constant that
//! reaches a run-time op becomes a parameter (its bytes go to the weights file the driver writes)
//! or, when it is one number, a scalar constant op. Ops the IR has no single op for are built
//! from several (`Gemm`, `PRelu`, `Elu`, `Selu`, `LRN`, `DepthToSpace`, `InstanceNormalization`,
//! `Max`/`Min`); see [`SUPPORTED`].
//!
//! Locations are node descriptions (`node "conv_3" (Conv, #17)`); every unsupported operator of
//! the model is reported at once, before anything is built.

use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

use prost::Message;

use super::onnx_proto as pb;
use crate::diag::{Errors, Loc};

mod seq;
use crate::ir::{
    Act, BinOp, CmpOp, DType, Dim, Graph, Input, Kind, MathOp, OpKind, Output, Padding, PoolKind,
    Producer, ReduceKind, ReshapeTo, Shape, TensorType, ValueId,
};

/// The operators this front end maps (opset 7 to 21 semantics, default domain).
pub const SUPPORTED: &[&str] = &[
    "Abs",
    "Add",
    "AveragePool",
    "BatchNormalization",
    "Cast",
    "Clip",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "ConvTranspose",
    "DepthToSpace",
    "Div",
    "Dropout",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Flatten",
    "Gather",
    "Gemm",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "Greater",
    "GreaterOrEqual",
    "HardSigmoid",
    "Identity",
    "InstanceNormalization",
    "LRN",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "MatMul",
    "Max",
    "MaxPool",
    "Mean",
    "Min",
    "Mul",
    "Neg",
    "NonZero",
    "PRelu",
    "Pad",
    "Pow",
    "Reciprocal",
    "ReduceMax",
    "ReduceMean",
    "ReduceSum",
    "Relu",
    "Reshape",
    "Selu",
    "Shape",
    "Sigmoid",
    "Slice",
    "Softmax",
    "Softplus",
    "Softsign",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Sum",
    "Tanh",
    "Tile",
    "Transpose",
    "Unsqueeze",
];

/// The most elements a folded constant may have (1 GiB of f32): a `ConstantOfShape` with a
/// huge shape is an error, not an allocation failure.
const MAX_CONST_ELEMENTS: usize = 1 << 28;

/// An f32 tensor the model's weights file must hold.
#[derive(Debug, Clone)]
pub struct Weight {
    pub key: String,
    pub dims: Vec<usize>,
    pub data: Vec<f32>,
}

/// What the front end made of an ONNX model.
#[derive(Debug)]
pub struct Imported {
    pub graph: Graph,
    /// The location table: what each [`Loc`] names (`node "conv_3" (Conv, #17)`, `input "x"`).
    pub locs: Vec<String>,
    /// The parameters' data, in the order of `graph.params` (keys equal).
    pub weights: Vec<Weight>,
    /// A Rust identifier per input, from the ONNX input names.
    pub input_idents: Vec<String>,
    /// Per input (as `input_idents`): `Some(n)` for a sequence of `n` elements (the `run`
    /// parameter is a `kiln::Seq`; the graph has `n` inputs for it).
    pub input_seq_lens: Vec<Option<usize>>,
    /// The external-data files read (for `cargo:rerun-if-changed`).
    pub external_files: Vec<std::path::PathBuf>,
}

impl Imported {
    /// What `at` names, for messages.
    pub fn describe(&self, at: Loc) -> &str {
        self.locs
            .get(at.0 as usize)
            .map_or("the model", String::as_str)
    }
}

/// Decodes and imports an ONNX model. `dir` is where external-data files are looked up (the
/// model's directory). Every problem goes to `errors` with a location in the returned table
/// (`None` only when the bytes are not an ONNX model at all: then the message is at `Loc(0)`,
/// which describes the model).
pub fn import(bytes: &[u8], dir: &Path, errors: &mut Errors) -> Imported {
    import_with(bytes, dir, &Options::default(), errors)
}

/// What the model file does not say and the caller does (the build driver's
/// [`crate::Builder::input_shape`] and [`crate::Builder::seq_input`]).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The sizes of graph inputs, by ONNX name: needed for sizes the model leaves symbolic
    /// (`dim_param`) or out; every size the model does state must agree. For a sequence input,
    /// the sizes of each of its elements.
    pub input_shapes: HashMap<String, Vec<usize>>,
    /// How many elements each sequence-typed input has, by name (ONNX never says).
    pub seq_lens: HashMap<String, usize>,
}

/// The names of a model's graph inputs that are not initializers, in order (what a build
/// script gives [`Options`] for), or why the bytes are not a model.
pub fn input_names(bytes: &[u8]) -> Result<Vec<String>, String> {
    let model = pb::ModelProto::decode(bytes).map_err(|e| format!("not an ONNX model: {e}"))?;
    let g = model.graph.unwrap_or_default();
    Ok(g.input
        .iter()
        .filter(|vi| !g.initializer.iter().any(|t| t.name() == vi.name()))
        .map(|vi| vi.name().to_string())
        .collect())
}

/// As [`import`], with what the model does not say given by `opts`.
pub fn import_with(bytes: &[u8], dir: &Path, opts: &Options, errors: &mut Errors) -> Imported {
    let mut cx = Importer {
        opts,
        graph: Graph {
            bindings: vec![Vec::new()],
            ..Graph::default()
        },
        locs: vec!["the model".to_string()],
        weights: Vec::new(),
        env: HashMap::new(),
        errors,
        opset: 13,
        dir,
        typed: Vec::new(),
        materialized: HashMap::new(),
        input_idents: Vec::new(),
        input_seq_lens: Vec::new(),
        external_files: std::cell::RefCell::new(Vec::new()),
    };
    match pb::ModelProto::decode(bytes) {
        Ok(model) => cx.model(&model),
        Err(e) => cx.errors.push(Loc(0), format!("not an ONNX model: {e}")),
    }
    Imported {
        graph: cx.graph,
        locs: cx.locs,
        weights: cx.weights,
        input_idents: cx.input_idents,
        input_seq_lens: cx.input_seq_lens,
        external_files: cx.external_files.into_inner(),
    }
}

/// A graph input's or output's declared type: the element dtype, the sizes (`None` when the
/// shape is absent; a size is `None` when symbolic or missing) and whether it is a sequence
/// (then these are its elements').
struct Declared {
    dtype: DType,
    dims: Option<Vec<Option<usize>>>,
    seq: bool,
}

fn declared(vi: &pb::ValueInfoProto) -> R<Declared> {
    use pb::type_proto::Value;
    let (t, seq) = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(Value::TensorType(t)) => (t, false),
        Some(Value::SequenceType(s)) => match s.elem_type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(Value::TensorType(t)) => (t, true),
            _ => return Err("only sequences of tensors are supported".into()),
        },
        _ => return Err("only tensors and sequences of tensors are supported as inputs and outputs (maps and optionals are not)".into()),
    };
    let dtype = dtype_of(t.elem_type())
        .ok_or_else(|| format!("element type {} is not supported", elem_name(t.elem_type())))?;
    let dims = t.shape.as_ref().map(|shape| {
        shape
            .dim
            .iter()
            .map(|d| match d.value {
                Some(pb::tensor_shape_proto::dimension::Value::DimValue(n)) => {
                    usize::try_from(n).ok()
                }
                _ => None,
            })
            .collect()
    });
    Ok(Declared { dtype, dims, seq })
}

/// `[2, n, 4]`-style sizes for messages (`?` for an unknown one).
fn show_dims(d: &[Option<usize>]) -> String {
    let s: Vec<String> = d
        .iter()
        .map(|d| d.map_or("?".to_string(), |n| n.to_string()))
        .collect();
    format!("[{}]", s.join(", "))
}

/// A tensor known at compile time. Integers (and bools) are kept as `i64`, floats as `f32`.
#[derive(Clone, Debug)]
struct Const {
    dtype: DType,
    dims: Vec<usize>,
    data: Data,
    /// The tensor of the model this one is a view of (an initializer or a node's constant
    /// result, seen through reshapes and (un)squeezes), with its shape: a parameter is made
    /// under that name and shape, so the weights file keeps the model's own tensors.
    src: Option<Rc<(String, Vec<usize>)>>,
}

#[derive(Clone, Debug)]
enum Data {
    F(Vec<f32>),
    I(Vec<i64>),
}

impl Const {
    fn ints(dims: Vec<usize>, v: Vec<i64>) -> Const {
        Const {
            dtype: DType::I64,
            dims,
            data: Data::I(v),
            src: None,
        }
    }
    fn as_ints(&self) -> Vec<i64> {
        match &self.data {
            Data::I(v) => v.clone(),
            // Saturating, like `as`: a float used as a size is a model error caught by the rule.
            Data::F(v) => v.iter().map(|&x| x as i64).collect(),
        }
    }
    fn as_floats(&self) -> Vec<f32> {
        match &self.data {
            Data::F(v) => v.clone(),
            Data::I(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }
    fn len(&self) -> usize {
        match &self.data {
            Data::F(v) => v.len(),
            Data::I(v) => v.len(),
        }
    }
    fn with(&self, dims: Vec<usize>, idx: &[usize]) -> Const {
        let data = match &self.data {
            Data::F(v) => Data::F(idx.iter().map(|&i| v[i]).collect()),
            Data::I(v) => Data::I(idx.iter().map(|&i| v[i]).collect()),
        };
        Const {
            dtype: self.dtype,
            dims,
            data,
            src: None,
        }
    }
}

/// A name's value: built in the graph, or known now.
#[derive(Clone, Debug)]
enum V {
    G(ValueId),
    C(Rc<Const>),
}

type R<T> = Result<T, String>;

struct Importer<'a, 'e> {
    opts: &'a Options,
    graph: Graph,
    locs: Vec<String>,
    weights: Vec<Weight>,
    env: HashMap<String, V>,
    errors: &'e mut Errors,
    opset: i64,
    dir: &'a Path,
    /// The shapes of `graph`'s values as far as inference has run (for `Shape`, `Flatten`, ...).
    typed: Vec<Shape>,
    /// Constants already turned into graph values, by name.
    materialized: HashMap<String, ValueId>,
    input_idents: Vec<String>,
    /// Per entry of `input_idents`: `Some(n)` for a sequence input of `n` elements.
    input_seq_lens: Vec<Option<usize>>,
    external_files: std::cell::RefCell<Vec<std::path::PathBuf>>,
}

fn dtype_of(elem: i32) -> Option<DType> {
    Some(match elem {
        1 => DType::F32,
        2 => DType::U8,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        11 => DType::F64,
        _ => return None,
    })
}

fn elem_name(elem: i32) -> String {
    pb::tensor_proto::DataType::try_from(elem)
        .map(|d| d.as_str_name().to_string())
        .unwrap_or_else(|_| format!("type {elem}"))
}

/// A Rust identifier made from an ONNX name (`gpu_0/data_0` → `gpu_0_data_0`, `0` → `x0`).
fn ident_of(name: &str, taken: &[String]) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'x');
    }
    if syn::parse_str::<syn::Ident>(&s).is_err() || s == "arena" || s == "self" || s == "_" {
        s.push('_');
    }
    let base = s.clone();
    let mut k = 1;
    while taken.contains(&s) {
        s = format!("{base}_{k}");
        k += 1;
    }
    s
}

/// Little-endian bytes (a whole number of elements) as numbers, in one copy: build scripts run
/// unoptimised by default, where an element-by-element `from_le_bytes` loop over a ResNet-50's
/// 100 MB of initializers took seconds.
fn from_le<T: bytemuck::Pod + Default>(raw: &[u8]) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    let mut v = vec![T::default(); raw.len() / size];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
    bytes.copy_from_slice(&raw[..bytes.len()]);
    if cfg!(target_endian = "big") {
        bytes.chunks_exact_mut(size).for_each(<[u8]>::reverse);
    }
    v
}

fn product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))
}

/// A convolution's input, weights and window, as `Importer::conv_window` reads them.
struct ConvWindow {
    x: ValueId,
    w: ValueId,
    wd: Vec<usize>,
    n: usize,
    kernel: Vec<usize>,
    stride: Vec<usize>,
    dilation: Vec<usize>,
    groups: usize,
}

fn to_dims(v: &[i64], what: &str) -> R<Vec<usize>> {
    v.iter()
        .map(|&d| usize::try_from(d).map_err(|_| format!("{what} has a negative size {d}")))
        .collect()
}

/// `axis` in `0..rank` (negative counts from the end).
fn norm_axis(axis: i64, rank: usize) -> R<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if (0..r).contains(&a) {
        Ok(a as usize)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

impl<'e> Importer<'_, 'e> {
    fn loc(&mut self, what: String) -> Loc {
        self.locs.push(what);
        Loc(self.locs.len() as u32 - 1)
    }

    fn model(&mut self, model: &pb::ModelProto) {
        for o in &model.opset_import {
            if o.domain().is_empty() || o.domain() == "ai.onnx" {
                self.opset = o.version();
            }
        }
        let Some(g) = &model.graph else {
            self.errors.push(Loc(0), "the model has no graph");
            return;
        };
        // Every unsupported operator at once, before building anything.
        let mut bad = false;
        for (k, node) in g.node.iter().enumerate() {
            let known = (node.domain().is_empty() || node.domain() == "ai.onnx")
                && (SUPPORTED.contains(&node.op_type()) || seq::OPS.contains(&node.op_type()));
            if !known {
                let at = self.node_loc(node, k);
                let domain = if node.domain().is_empty() {
                    String::new()
                } else {
                    format!(" (domain `{}`)", node.domain())
                };
                self.errors.push(
                    at,
                    format!("unsupported operator `{}`{domain}", node.op_type()),
                );
                bad = true;
            }
        }
        if bad {
            return;
        }
        for t in &g.initializer {
            let at = self.loc(format!("initializer \"{}\"", t.name()));
            match self.tensor(t) {
                Ok(mut c) => {
                    c.src = Some(Rc::new((t.name().to_string(), c.dims.clone())));
                    self.env.insert(t.name().to_string(), V::C(Rc::new(c)));
                }
                Err(e) => self.errors.push(at, e),
            }
        }
        for vi in &g.input {
            if self.env.contains_key(vi.name()) {
                continue; // an initializer listed as an input (IR version < 4)
            }
            self.input(vi);
        }
        if !self.errors.is_empty() {
            return;
        }
        for (k, node) in g.node.iter().enumerate() {
            let at = self.node_loc(node, k);
            match self.node(node, at) {
                Ok(outs) => {
                    for (name, v) in node.output.iter().zip(outs) {
                        if name.is_empty() {
                            continue;
                        }
                        let v = match v {
                            V::G(id) => {
                                let slot = &mut self.graph.values[id.index()].name;
                                if slot.is_none() {
                                    *slot = Some(name.clone());
                                }
                                V::G(id)
                            }
                            // A new constant is a tensor of the model under this name.
                            V::C(c) if c.src.is_none() => {
                                let mut c = (*c).clone();
                                c.src = Some(Rc::new((name.clone(), c.dims.clone())));
                                V::C(Rc::new(c))
                            }
                            c => c,
                        };
                        self.env.insert(name.clone(), v);
                    }
                }
                Err(msg) => {
                    self.errors.push(at, msg);
                    // Later nodes would only report that this one's outputs are missing.
                    return;
                }
            }
        }
        self.outputs(g);
    }

    fn node_loc(&mut self, node: &pb::NodeProto, k: usize) -> Loc {
        let what = if node.name().is_empty() {
            format!("node ({}, #{k})", node.op_type())
        } else {
            format!("node \"{}\" ({}, #{k})", node.name(), node.op_type())
        };
        self.loc(what)
    }

    fn input(&mut self, vi: &pb::ValueInfoProto) {
        let name = vi.name().to_string();
        let at = self.loc(format!("input \"{name}\""));
        let decl = match declared(vi) {
            Ok(d) => d,
            Err(e) => {
                self.errors.push(at, e);
                return;
            }
        };
        let max = crate::infer::MAX_SEQ_LEN;
        // A sequence's length first, so that a missing length and missing sizes are two errors.
        let seq_len = match (decl.seq, self.opts.seq_lens.get(&name)) {
            (false, _) => None,
            (true, Some(&len)) if (1..=max).contains(&len) => Some(len),
            (true, Some(&len)) => {
                let msg = format!("a sequence input has 1 to {max} elements, not {len}");
                self.errors.push(at, msg);
                None
            }
            (true, None) => {
                self.errors.push(at, format!("a sequence input: ONNX does not say how many elements it has; give the number with `Builder::seq_input(\"{name}\", n)`"));
                None
            }
        };
        let its = if decl.seq { "its elements'" } else { "its" };
        let dims = match (self.opts.input_shapes.get(&name), &decl.dims) {
            (Some(given), stated) => {
                let agrees = stated.as_ref().is_none_or(|s| {
                    s.len() == given.len()
                        && s.iter().zip(given).all(|(s, g)| s.is_none_or(|s| s == *g))
                });
                if !agrees {
                    let stated = stated.as_ref().map(|s| show_dims(s)).unwrap_or_default();
                    self.errors.push(
                        at,
                        format!(
                            "the builder gives the sizes {given:?} but the model declares {stated}"
                        ),
                    );
                    return;
                }
                given.clone()
            }
            (None, Some(stated)) if stated.iter().all(Option::is_some) => {
                stated.iter().map(|d| d.unwrap_or(0)).collect()
            }
            (None, stated) => {
                let what = match stated {
                    Some(s) => format!("{its} sizes {} are not all known", show_dims(s)),
                    None => format!("{its} shape is not given"),
                };
                self.errors.push(at, format!("{what}; kiln compiles for known sizes: give them with `Builder::input_shape(\"{name}\", &[...])` (or set them with onnx.tools.update_model_dims)"));
                return;
            }
        };
        if dims.len() > crate::ir::MAX_RANK {
            let msg = format!(
                "rank {} is above kiln's {}",
                dims.len(),
                crate::ir::MAX_RANK
            );
            self.errors.push(at, msg);
            return;
        }
        if decl.seq && seq_len.is_none() {
            return;
        }
        let ty = TensorType {
            dtype: decl.dtype,
            dims: dims.into_iter().map(Dim::Known).collect(),
            kind: Kind::Tensor,
        };
        let id = ident_of(&name, &self.input_idents);
        self.input_idents.push(id);
        self.input_seq_lens.push(seq_len);
        if let Some(len) = seq_len {
            self.seq_input(&name, ty, len, at);
            return;
        }
        let i = self.graph.inputs.len();
        let v = self.graph.add_value(Producer::Input(i), at);
        self.graph.values[v.index()].name = Some(name.clone());
        self.graph.inputs.push(Input {
            name: name.clone(),
            value: v,
            ty,
            loc: at,
        });
        self.env.insert(name, V::G(v));
    }

    fn outputs(&mut self, g: &pb::GraphProto) {
        let mut pending = Vec::new();
        for vi in &g.output {
            let at = self.loc(format!("output \"{}\"", vi.name()));
            let Some(v) = self.env.get(vi.name()).cloned() else {
                self.errors
                    .push(at, "no node computes this output and it is no input");
                continue;
            };
            let v = match self.g(&v, vi.name()) {
                Ok(v) => v,
                Err(e) => {
                    self.errors.push(at, e);
                    continue;
                }
            };
            let decl = match declared(vi) {
                Ok(d) => d,
                Err(e) => {
                    self.errors.push(at, e);
                    continue;
                }
            };
            let known = decl
                .dims
                .as_ref()
                .filter(|d| decl.seq || d.iter().all(Option::is_some));
            match known {
                // A sequence's element sizes that differ or are not stated are `?`.
                Some(dims) => self.graph.outputs.push(Output {
                    value: v,
                    ty: TensorType {
                        dtype: decl.dtype,
                        dims: dims
                            .iter()
                            .map(|d| d.map_or(Dim::Any, Dim::Known))
                            .collect(),
                        kind: Kind::Tensor,
                    },
                    ty_loc: at,
                    seq: decl.seq,
                }),
                // No declared shape: the computed one is the output's type.
                None => pending.push((v, at, decl.seq)),
            }
        }
        if pending.is_empty() || !self.errors.is_empty() {
            return;
        }
        let outputs = std::mem::take(&mut self.graph.outputs);
        let mut scratch = Errors::default();
        let typed = crate::infer::infer(&self.graph, &[], &mut scratch);
        self.graph.outputs = outputs;
        let Some(typed) = typed else {
            for d in scratch.iter() {
                self.errors.push(d.at, &d.msg);
            }
            return;
        };
        // Declared outputs first, in the model's order otherwise.
        for (v, at, seq) in pending {
            let s = typed.shape(v);
            let dims = match typed.seq(v) {
                // Inference says what the declaration does not (a wrong kind is its error).
                Some(sv) if seq => sv
                    .super_dims()
                    .unwrap_or_default()
                    .iter()
                    .map(|d| d.map_or(Dim::Any, Dim::Known))
                    .collect(),
                _ => s.dims.iter().map(|&d| Dim::Known(d)).collect(),
            };
            self.graph.outputs.push(Output {
                value: v,
                ty: TensorType {
                    dtype: s.dtype,
                    dims,
                    kind: Kind::Tensor,
                },
                ty_loc: at,
                seq,
            });
        }
        let order: Vec<ValueId> = g
            .output
            .iter()
            .filter_map(|vi| match self.env.get(vi.name()) {
                Some(V::G(v)) => Some(*v),
                _ => None,
            })
            .collect();
        self.graph.outputs.sort_by_key(|o| {
            order
                .iter()
                .position(|&v| v == o.value)
                .unwrap_or(usize::MAX)
        });
    }
    /// Decodes an initializer or an attribute's tensor, reading external data from `dir`.
    fn tensor(&self, t: &pb::TensorProto) -> R<Const> {
        let elem = t.data_type();
        let dtype = dtype_of(elem)
            .ok_or_else(|| format!("element type {} is not supported", elem_name(elem)))?;
        let dims = to_dims(&t.dims, "the tensor")?;
        let n = product(&dims)
            .filter(|&n| n <= MAX_CONST_ELEMENTS)
            .ok_or("the tensor is too large")?;
        let external;
        let raw: Option<&[u8]> = if t.data_location() == pb::tensor_proto::DataLocation::External {
            external = self.external(t, n * dtype.size())?;
            Some(&external)
        } else {
            t.raw_data.as_deref()
        };
        let data = if let Some(raw) = raw {
            let size = dtype.size();
            if raw.len() != n * size {
                return Err(format!(
                    "the tensor has {} bytes of data but its shape {dims:?} needs {}",
                    raw.len(),
                    n * size
                ));
            }
            match dtype {
                DType::F32 => Data::F(from_le(raw)),
                DType::F64 => Data::F(from_le::<f64>(raw).iter().map(|&x| x as f32).collect()),
                DType::I64 => Data::I(from_le(raw)),
                DType::I32 => Data::I(from_le::<i32>(raw).iter().map(|&x| x as i64).collect()),
                DType::U8 | DType::Bool => Data::I(raw.iter().map(|&b| b as i64).collect()),
            }
        } else {
            let (data, len) = match dtype {
                DType::F32 => (Data::F(t.float_data.clone()), t.float_data.len()),
                DType::F64 => (
                    Data::F(t.double_data.iter().map(|&x| x as f32).collect()),
                    t.double_data.len(),
                ),
                DType::I64 => (Data::I(t.int64_data.clone()), t.int64_data.len()),
                DType::I32 | DType::U8 | DType::Bool => (
                    Data::I(t.int32_data.iter().map(|&x| x as i64).collect()),
                    t.int32_data.len(),
                ),
            };
            if len != n {
                return Err(format!(
                    "the tensor has {len} values but its shape {dims:?} needs {n}"
                ));
            }
            data
        };
        Ok(Const {
            dtype,
            dims,
            data,
            src: None,
        })
    }

    /// The bytes of a tensor stored in an external-data file next to the model.
    fn external(&self, t: &pb::TensorProto, len: usize) -> R<Vec<u8>> {
        use std::io::{Read, Seek, SeekFrom};
        let get = |k: &str| {
            t.external_data
                .iter()
                .find(|e| e.key() == k)
                .map(|e| e.value())
        };
        let location = get("location").ok_or("external data without a `location`")?;
        let offset: u64 = get("offset")
            .map_or(Ok(0), str::parse)
            .map_err(|_| "bad `offset`")?;
        if let Some(l) = get("length") {
            if l.parse::<usize>().ok() != Some(len) {
                return Err(format!(
                    "external data `{location}`: length {l}, expected {len}"
                ));
            }
        }
        let rel = Path::new(location);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(format!(
                "external data `{location}` must be a path inside the model's directory"
            ));
        }
        let path = self.dir.join(rel);
        self.external_files.borrow_mut().push(path.clone());
        let read = || -> std::io::Result<Vec<u8>> {
            let mut f = std::fs::File::open(&path)?;
            if !f.metadata()?.is_file() {
                return Err(std::io::Error::other("not a regular file"));
            }
            f.seek(SeekFrom::Start(offset))?;
            let mut buf = vec![0; len];
            f.read_exact(&mut buf)?;
            Ok(buf)
        };
        read().map_err(|e| format!("cannot read external data `{}`: {e}", path.display()))
    }

    fn attr<'n>(node: &'n pb::NodeProto, name: &str) -> Option<&'n pb::AttributeProto> {
        node.attribute.iter().find(|a| a.name() == name)
    }
    fn attr_i(node: &pb::NodeProto, name: &str, default: i64) -> i64 {
        Self::attr(node, name).map_or(default, |a| a.i())
    }
    fn attr_f(node: &pb::NodeProto, name: &str, default: f32) -> f32 {
        Self::attr(node, name).map_or(default, |a| a.f())
    }
    fn attr_ints(node: &pb::NodeProto, name: &str) -> Option<Vec<i64>> {
        Self::attr(node, name).map(|a| a.ints.clone())
    }
    fn attr_s(node: &pb::NodeProto, name: &str) -> String {
        Self::attr(node, name)
            .map_or_else(String::new, |a| String::from_utf8_lossy(a.s()).into_owned())
    }

    /// Input `i` of `node`, `None` when absent (or given as the empty name).
    fn arg(&self, node: &pb::NodeProto, i: usize) -> R<Option<V>> {
        match node.input.get(i) {
            None => Ok(None),
            Some(n) if n.is_empty() => Ok(None),
            Some(n) => self
                .env
                .get(n)
                .cloned()
                .map(Some)
                .ok_or_else(|| format!("input `{n}` is not defined before this node")),
        }
    }
    fn need(&self, node: &pb::NodeProto, i: usize) -> R<V> {
        self.arg(node, i)?
            .ok_or_else(|| format!("input {} is missing", i + 1))
    }
    /// A constant input (sizes, axes, shapes): folded, never a run-time value.
    fn konst(&self, node: &pb::NodeProto, i: usize, what: &str) -> R<Option<Rc<Const>>> {
        match self.arg(node, i)? {
            None => Ok(None),
            Some(V::C(c)) => Ok(Some(c)),
            Some(V::G(_)) => Err(format!(
                "{what} (input {}) must be known at compile time; here it is computed at run time",
                i + 1
            )),
        }
    }
    fn name_of(node: &pb::NodeProto, i: usize) -> String {
        node.input.get(i).cloned().unwrap_or_default()
    }

    /// `v` as a graph value: constants become a parameter, or a scalar constant op.
    fn g(&mut self, v: &V, name: &str) -> R<ValueId> {
        let c = match v {
            V::G(id) => return Ok(*id),
            V::C(c) => c,
        };
        if let Some(&id) = self.materialized.get(name) {
            return Ok(id);
        }
        let at = self.loc(format!("constant \"{name}\""));
        let id = match (&c.data, c.len()) {
            (Data::F(v), 1) => {
                let mut k = self
                    .graph
                    .add_op(OpKind::Constant(v[0]), vec![], 1, at, vec![], None)[0];
                // An f64 number (the importer keeps floats as f32, so it is exact only when
                // the value is an f32, as the integers and halves exporters write are) is cast
                // back, so it meets f64 operands with their dtype.
                if c.dtype == DType::F64 {
                    k = self.op(OpKind::Cast(DType::F64), vec![k], at);
                }
                if c.dims.is_empty() {
                    k
                } else {
                    self.reshape(k, c.dims.iter().map(|&d| d as i64).collect(), at)
                }
            }
            (Data::F(v), _) if c.dtype == DType::F32 || c.dtype == DType::F64 => {
                // Under the model's own tensor, reshaped here when it was seen through a view.
                match c.src.as_deref() {
                    Some((key, dims)) if product(dims) == Some(v.len()) => {
                        let p = match self.materialized.get(&format!("{key}#param")) {
                            Some(&p) => p,
                            None => {
                                let p = self.param(key, dims.clone(), v.clone(), at);
                                self.materialized.insert(format!("{key}#param"), p);
                                p
                            }
                        };
                        if *dims == c.dims {
                            p
                        } else {
                            self.reshape(p, c.dims.iter().map(|&d| d as i64).collect(), at)
                        }
                    }
                    _ => self.param(name, c.dims.clone(), v.clone(), at),
                }
            }
            _ => {
                return Err(format!(
                    "the constant `{name}` ({} {:?}) is used as a run-time value; kiln's constants are f32 parameters or single f32 numbers",
                    c.dtype, c.dims
                ))
            }
        };
        self.materialized.insert(name.to_string(), id);
        Ok(id)
    }

    /// A new f32 parameter with its data.
    fn param(&mut self, key: &str, dims: Vec<usize>, data: Vec<f32>, at: Loc) -> ValueId {
        let mut key = key.to_string();
        while self.weights.iter().any(|w| w.key == key) {
            key.push('\'');
        }
        self.weights.push(Weight {
            key: key.clone(),
            dims: dims.clone(),
            data,
        });
        self.graph
            .add_param(key, Shape::tensor(DType::F32, dims), at, at)
    }

    /// A weights input (conv, batch norm, gemm): must be an f32 constant; always a parameter.
    fn weight(&mut self, node: &pb::NodeProto, i: usize, what: &str) -> R<(ValueId, Vec<usize>)> {
        let name = Self::name_of(node, i);
        let c = match self.need(node, i)? {
            V::C(c) => c,
            V::G(_) => {
                return Err(format!(
                    "{what} (input {}, `{name}`) must be an initializer: kiln compiles weights in",
                    i + 1
                ))
            }
        };
        if !matches!(c.data, Data::F(_)) {
            return Err(format!("{what} `{name}` must be f32, not {}", c.dtype));
        }
        // The model's own tensor when this is it (not a reshaped view of it).
        let name = match c.src.as_deref() {
            Some((key, dims)) if *dims == c.dims => key.clone(),
            _ => name,
        };
        if let Some(&id) = self.materialized.get(&format!("{name}#param")) {
            return Ok((id, c.dims.clone()));
        }
        let at = self.loc(format!("initializer \"{name}\""));
        let id = self.param(&name, c.dims.clone(), c.as_floats(), at);
        self.materialized.insert(format!("{name}#param"), id);
        Ok((id, c.dims.clone()))
    }

    fn op(&mut self, kind: OpKind, args: Vec<ValueId>, at: Loc) -> ValueId {
        let locs = vec![at; args.len()];
        self.graph.add_op(kind, args, 1, at, locs, None)[0]
    }
    fn reshape(&mut self, x: ValueId, dims: Vec<i64>, at: Loc) -> ValueId {
        self.op(OpKind::Reshape(ReshapeTo::Dims(dims)), vec![x], at)
    }
    fn scalar(&mut self, v: f32, at: Loc) -> ValueId {
        self.op(OpKind::Constant(v), vec![], at)
    }
    fn bin(&mut self, op: BinOp, a: ValueId, b: ValueId, at: Loc) -> ValueId {
        self.op(OpKind::Binary(op), vec![a, b], at)
    }
    fn unary(&mut self, act: Act, x: ValueId, at: Loc) -> ValueId {
        self.op(OpKind::Unary(act), vec![x], at)
    }
    fn math(&mut self, m: MathOp, x: ValueId, at: Loc) -> ValueId {
        self.op(OpKind::Math(m), vec![x], at)
    }

    /// The shape of `v` as inference sees the graph built so far.
    fn shape_of(&mut self, v: ValueId) -> R<Shape> {
        if v.index() >= self.typed.len() {
            let outputs = std::mem::take(&mut self.graph.outputs);
            let mut scratch = Errors::default();
            let typed = crate::infer::infer(&self.graph, &[], &mut scratch);
            self.graph.outputs = outputs;
            match typed {
                Some(t) => self.typed = t.types,
                None => {
                    let first = scratch.iter().next().map(|d| {
                        format!(
                            "{}: {}",
                            self.locs.get(d.at.0 as usize).map_or("", String::as_str),
                            d.msg
                        )
                    });
                    return Err(format!(
                        "the shape of an input of this node cannot be inferred ({})",
                        first.unwrap_or_default()
                    ));
                }
            }
        }
        self.typed
            .get(v.index())
            .cloned()
            .ok_or_else(|| "internal: a value has no shape".to_string())
    }
    fn dims_of(&mut self, v: &V) -> R<Vec<usize>> {
        match v {
            V::C(c) => Ok(c.dims.clone()),
            V::G(id) => Ok(self.shape_of(*id)?.dims),
        }
    }

    /// One node: its outputs, in order.
    fn node(&mut self, node: &pb::NodeProto, at: Loc) -> R<Vec<V>> {
        let op = node.op_type();
        if seq::OPS.contains(&op) {
            return self.seq_node(node, at);
        }
        let gv = |id: ValueId| vec![V::G(id)];
        // Arguments as graph values, for ops without compile-time folding.
        macro_rules! x {
            ($i:expr) => {{
                let v = self.need(node, $i)?;
                self.g(&v, &Self::name_of(node, $i))?
            }};
        }
        Ok(match op {
            "Identity" | "Dropout" => {
                // Inference: the data passes through; the mask output (if named) stays unbound,
                // so a node that reads it is reported as reading an undefined input.
                vec![self.need(node, 0)?]
            }
            "Constant" => {
                let a = node.attribute.first().ok_or("a Constant needs a value")?;
                let c = match a.name() {
                    "value" => self.tensor(a.t.as_ref().ok_or("`value` holds no tensor")?)?,
                    "value_float" => Const {
                        dtype: DType::F32,
                        dims: vec![],
                        data: Data::F(vec![a.f()]),
                        src: None,
                    },
                    "value_floats" => Const {
                        dtype: DType::F32,
                        dims: vec![a.floats.len()],
                        data: Data::F(a.floats.clone()),
                        src: None,
                    },
                    "value_int" => Const::ints(vec![], vec![a.i()]),
                    "value_ints" => Const::ints(vec![a.ints.len()], a.ints.clone()),
                    other => return Err(format!("Constant `{other}` is not supported")),
                };
                vec![V::C(Rc::new(c))]
            }
            "ConstantOfShape" => {
                let shape = self
                    .konst(node, 0, "the shape")?
                    .ok_or("the shape is missing")?;
                let dims = to_dims(&shape.as_ints(), "the shape")?;
                let n = product(&dims)
                    .filter(|&n| n <= MAX_CONST_ELEMENTS)
                    .ok_or("the constant is too large")?;
                let value = match Self::attr(node, "value").and_then(|a| a.t.as_ref()) {
                    Some(t) => self.tensor(t)?,
                    None => Const {
                        dtype: DType::F32,
                        dims: vec![1],
                        data: Data::F(vec![0.0]),
                        src: None,
                    },
                };
                if value.len() != 1 {
                    return Err("ConstantOfShape's value must have one element".into());
                }
                let data = match &value.data {
                    Data::F(v) => Data::F(vec![v[0]; n]),
                    Data::I(v) => Data::I(vec![v[0]; n]),
                };
                let c = Const {
                    dtype: value.dtype,
                    dims,
                    data,
                    src: None,
                };
                vec![V::C(Rc::new(c))]
            }
            "Shape" => {
                let v = self.need(node, 0)?;
                let dims = self.dims_of(&v)?;
                let r = dims.len() as i64;
                let clamp = |a: i64| (if a < 0 { a + r } else { a }).clamp(0, r) as usize;
                let start = clamp(Self::attr_i(node, "start", 0));
                let end = clamp(Self::attr_i(node, "end", r)).max(start);
                let d: Vec<i64> = dims[start..end].iter().map(|&d| d as i64).collect();
                vec![V::C(Rc::new(Const::ints(vec![d.len()], d)))]
            }
            "Cast" => {
                let to = Self::attr_i(node, "to", 1) as i32;
                let dt = dtype_of(to)
                    .ok_or_else(|| format!("Cast to {} is not supported", elem_name(to)))?;
                match self.need(node, 0)? {
                    V::C(c) => {
                        let data = match dt {
                            DType::F32 | DType::F64 => Data::F(c.as_floats()),
                            DType::Bool => {
                                Data::I(c.as_ints().iter().map(|&x| (x != 0) as i64).collect())
                            }
                            _ => Data::I(c.as_ints()),
                        };
                        vec![V::C(Rc::new(Const {
                            dtype: dt,
                            dims: c.dims.clone(),
                            data,
                            src: None,
                        }))]
                    }
                    v => {
                        let id = self.g(&v, &Self::name_of(node, 0))?;
                        gv(self.op(OpKind::Cast(dt), vec![id], at))
                    }
                }
            }
            "Add" | "Sub" | "Mul" | "Div" => {
                let bop = match op {
                    "Add" => BinOp::Add,
                    "Sub" => BinOp::Sub,
                    "Mul" => BinOp::Mul,
                    _ => BinOp::Div,
                };
                let (a, b) = (self.need(node, 0)?, self.need(node, 1)?);
                if let (V::C(a), V::C(b)) = (&a, &b) {
                    if let Some(c) = fold_binary(bop, a, b) {
                        return Ok(vec![V::C(Rc::new(c))]);
                    }
                }
                let a = self.g(&a, &Self::name_of(node, 0))?;
                let b = self.g(&b, &Self::name_of(node, 1))?;
                gv(self.bin(bop, a, b, at))
            }
            "Sum" | "Mean" | "Max" | "Min" => {
                let n = node.input.len();
                if n == 0 {
                    return Err(format!("{op} needs at least one input"));
                }
                let mut acc = x!(0);
                for i in 1..n {
                    let b = x!(i);
                    acc = match op {
                        "Sum" | "Mean" => self.bin(BinOp::Add, acc, b, at),
                        // max(a, b) = a + relu(b - a); min(a, b) = a - relu(a - b).
                        "Max" => {
                            let d = self.bin(BinOp::Sub, b, acc, at);
                            let r = self.unary(Act::Relu, d, at);
                            self.bin(BinOp::Add, acc, r, at)
                        }
                        _ => {
                            let d = self.bin(BinOp::Sub, acc, b, at);
                            let r = self.unary(Act::Relu, d, at);
                            self.bin(BinOp::Sub, acc, r, at)
                        }
                    };
                }
                if op == "Mean" && n > 1 {
                    let k = self.scalar(1.0 / n as f32, at);
                    acc = self.bin(BinOp::Mul, acc, k, at);
                }
                if n == 1 {
                    // One input: the result is that input (copied if it is an output).
                    return Ok(vec![self.need(node, 0)?]);
                }
                gv(acc)
            }
            "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => {
                let c = match op {
                    "Equal" => CmpOp::Equal,
                    "Less" => CmpOp::Less,
                    "Greater" => CmpOp::Greater,
                    "LessOrEqual" => CmpOp::LessEq,
                    _ => CmpOp::GreaterEq,
                };
                let (a, b) = (x!(0), x!(1));
                gv(self.op(OpKind::Compare(c), vec![a, b], at))
            }
            "Pow" => {
                let (a, b) = (x!(0), x!(1));
                gv(self.op(OpKind::Pow, vec![a, b], at))
            }
            "Relu" => {
                let x = x!(0);
                gv(self.unary(Act::Relu, x, at))
            }
            "Sigmoid" => {
                let x = x!(0);
                gv(self.unary(Act::Sigmoid, x, at))
            }
            "Tanh" => {
                let x = x!(0);
                gv(self.unary(Act::Tanh, x, at))
            }
            "LeakyRelu" => {
                let x = x!(0);
                let alpha = Self::attr_f(node, "alpha", 0.01);
                gv(self.unary(Act::LeakyRelu { alpha }, x, at))
            }
            "Clip" => {
                let x = x!(0);
                let (mut min, mut max) = (f32::MIN, f32::MAX);
                if self.opset < 11 {
                    min = Self::attr_f(node, "min", min);
                    max = Self::attr_f(node, "max", max);
                } else {
                    if let Some(c) = self.konst(node, 1, "the minimum")? {
                        min = c.as_floats().first().copied().unwrap_or(min);
                    }
                    if let Some(c) = self.konst(node, 2, "the maximum")? {
                        max = c.as_floats().first().copied().unwrap_or(max);
                    }
                }
                // Infinite bounds are the widest finite ones (the same clamp on f32 values).
                let (min, max) = (min.max(f32::MIN), max.min(f32::MAX));
                gv(self.unary(Act::Clip { min, max }, x, at))
            }
            "HardSigmoid" => {
                // clip(alpha * x + beta, 0, 1)
                let x = x!(0);
                let a = self.scalar(Self::attr_f(node, "alpha", 0.2), at);
                let b = self.scalar(Self::attr_f(node, "beta", 0.5), at);
                let y = self.bin(BinOp::Mul, x, a, at);
                let y = self.bin(BinOp::Add, y, b, at);
                gv(self.unary(Act::Clip { min: 0.0, max: 1.0 }, y, at))
            }
            "Exp" | "Log" | "Sqrt" | "Neg" | "Abs" | "Reciprocal" | "Erf" | "Softplus"
            | "Softsign" => {
                let m = match op {
                    "Exp" => MathOp::Exp,
                    "Log" => MathOp::Log,
                    "Sqrt" => MathOp::Sqrt,
                    "Neg" => MathOp::Neg,
                    "Abs" => MathOp::Abs,
                    "Reciprocal" => MathOp::Reciprocal,
                    "Erf" => MathOp::Erf,
                    "Softplus" => MathOp::Softplus,
                    _ => MathOp::Softsign,
                };
                if let V::C(c) = self.need(node, 0)? {
                    if m == MathOp::Neg {
                        let data = match &c.data {
                            Data::F(v) => Data::F(v.iter().map(|x| -x).collect()),
                            Data::I(v) => Data::I(v.iter().map(|x| x.wrapping_neg()).collect()),
                        };
                        return Ok(vec![V::C(Rc::new(Const {
                            data,
                            src: None,
                            ..(*c).clone()
                        }))]);
                    }
                }
                let x = x!(0);
                gv(self.math(m, x, at))
            }
            "Elu" | "Selu" => {
                // elu(x) = relu(x) + alpha * (exp(min(x, 0)) - 1), min(x, 0) = -relu(-x).
                let x = x!(0);
                let (alpha, gamma) = if op == "Elu" {
                    (Self::attr_f(node, "alpha", 1.0), 1.0)
                } else {
                    (
                        Self::attr_f(node, "alpha", 1.673_263_2),
                        Self::attr_f(node, "gamma", 1.050_701),
                    )
                };
                gv(self.elu(x, alpha, gamma, at))
            }
            "PRelu" => {
                // prelu(x) = relu(x) + slope * (x - relu(x)).
                let x = x!(0);
                let mut slope = x!(1);
                // PyTorch exports a per-channel slope as `[C]`, which older opsets broadcast
                // along axis 1 of the input: make it `[C, 1, ...]`.
                let xd = self.shape_of(x)?.dims;
                let sd = self.shape_of(slope)?.dims;
                if let [c] = sd[..] {
                    if xd.len() > 2 && xd[1] == c && xd[xd.len() - 1] != c {
                        let mut s = vec![c as i64];
                        s.extend(std::iter::repeat_n(1, xd.len() - 2));
                        slope = self.reshape(slope, s, at);
                    }
                }
                let r = self.unary(Act::Relu, x, at);
                let neg = self.bin(BinOp::Sub, x, r, at);
                let s = self.bin(BinOp::Mul, neg, slope, at);
                gv(self.bin(BinOp::Add, r, s, at))
            }
            "Conv" => gv(self.conv(node, at)?),
            "ConvTranspose" => gv(self.conv_transpose(node, at)?),
            "BatchNormalization" => {
                if Self::attr_i(node, "training_mode", 0) != 0 {
                    return Err("training mode is not supported (inference only)".into());
                }
                if node.output.iter().skip(1).any(|o| !o.is_empty()) {
                    return Err(
                        "the running-statistics outputs are not supported (inference only)".into(),
                    );
                }
                let x = x!(0);
                let mut args = vec![x];
                for (i, what) in [
                    (1, "the scale"),
                    (2, "the bias"),
                    (3, "the mean"),
                    (4, "the variance"),
                ] {
                    args.push(self.weight(node, i, what)?.0);
                }
                let eps = Self::attr_f(node, "epsilon", 1e-5);
                let locs = vec![at; args.len()];
                gv(self.graph.add_op(
                    OpKind::BatchNorm {
                        eps,
                        act: Act::None,
                    },
                    args,
                    1,
                    at,
                    locs,
                    None,
                )[0])
            }
            "InstanceNormalization" => {
                // (x - mean) / sqrt(var + eps) * scale + bias over each sample's channel.
                let x = x!(0);
                let rank = self.shape_of(x)?.rank();
                if rank < 3 {
                    return Err("InstanceNormalization needs an input of rank 3 or more".into());
                }
                let axes: Vec<i64> = (2..rank as i64).collect();
                let mean = self.op(
                    OpKind::Reduce {
                        kind: ReduceKind::Mean,
                        axes: axes.clone(),
                        keepdims: true,
                    },
                    vec![x],
                    at,
                );
                let d = self.bin(BinOp::Sub, x, mean, at);
                let d2 = self.bin(BinOp::Mul, d, d, at);
                let var = self.op(
                    OpKind::Reduce {
                        kind: ReduceKind::Mean,
                        axes,
                        keepdims: true,
                    },
                    vec![d2],
                    at,
                );
                let eps = self.scalar(Self::attr_f(node, "epsilon", 1e-5), at);
                let v = self.bin(BinOp::Add, var, eps, at);
                let s = self.math(MathOp::Sqrt, v, at);
                let y = self.bin(BinOp::Div, d, s, at);
                let per_channel = |this: &mut Self, i: usize, what: &str| -> R<ValueId> {
                    let (p, dims) = this.weight(node, i, what)?;
                    let mut shape = vec![dims.iter().product::<usize>() as i64];
                    shape.extend(std::iter::repeat_n(1, rank - 2));
                    Ok(this.reshape(p, shape, at))
                };
                let scale = per_channel(self, 1, "the scale")?;
                let bias = per_channel(self, 2, "the bias")?;
                let y = self.bin(BinOp::Mul, y, scale, at);
                gv(self.bin(BinOp::Add, y, bias, at))
            }
            "LRN" => gv(self.lrn(node, at)?),
            "MaxPool" | "AveragePool" => {
                if node.output.len() > 1 && !node.output[1].is_empty() {
                    return Err("MaxPool's indices output is not supported".into());
                }
                if Self::attr_i(node, "ceil_mode", 0) != 0 {
                    return Err("ceil_mode = 1 is not supported".into());
                }
                let x = x!(0);
                let kernel = to_dims(
                    &Self::attr_ints(node, "kernel_shape").ok_or("kernel_shape is missing")?,
                    "kernel_shape",
                )?;
                let n = kernel.len();
                let stride = Self::per_dim(node, "strides", n)?;
                let dilation = Self::per_dim(node, "dilations", n)?;
                let pad = self.padding(node, n)?;
                let kind = if op == "MaxPool" {
                    PoolKind::Max
                } else {
                    PoolKind::Avg
                };
                let count_include_pad = Self::attr_i(node, "count_include_pad", 0) != 0;
                gv(self.op(
                    OpKind::Pool {
                        kind,
                        kernel,
                        stride,
                        dilation,
                        pad,
                        count_include_pad,
                    },
                    vec![x],
                    at,
                ))
            }
            "GlobalAveragePool" => {
                let x = x!(0);
                gv(self.op(OpKind::GlobalAvgPool, vec![x], at))
            }
            "GlobalMaxPool" => {
                let x = x!(0);
                let rank = self.shape_of(x)?.rank();
                let axes = (2..rank as i64).collect();
                gv(self.op(
                    OpKind::Reduce {
                        kind: ReduceKind::Max,
                        axes,
                        keepdims: true,
                    },
                    vec![x],
                    at,
                ))
            }
            "Flatten" => {
                let v = self.need(node, 0)?;
                let dims = self.dims_of(&v)?;
                let axis = norm_axis(Self::attr_i(node, "axis", 1), dims.len() + 1)?;
                let outer = product(&dims[..axis]).ok_or("the shape overflows")? as i64;
                self.reshape_v(v, &Self::name_of(node, 0), vec![outer, -1], at)?
            }
            "Reshape" => {
                let shape = match self.konst(node, 1, "the shape")? {
                    Some(s) => s.as_ints(),
                    None => Self::attr_ints(node, "shape").ok_or("the shape is missing")?,
                };
                let v = self.need(node, 0)?;
                self.reshape_v(v, &Self::name_of(node, 0), shape, at)?
            }
            "Squeeze" | "Unsqueeze" => {
                let axes = match self.konst(node, 1, "the axes")? {
                    Some(c) => c.as_ints(),
                    None => Self::attr_ints(node, "axes").unwrap_or_default(),
                };
                let v = self.need(node, 0)?;
                match v {
                    V::C(c) => {
                        let dims = if op == "Squeeze" {
                            squeeze_dims(&c.dims, &axes)?
                        } else {
                            unsqueeze_dims(&c.dims, &axes)?
                        };
                        vec![V::C(Rc::new(Const {
                            dims,
                            ..(*c).clone()
                        }))]
                    }
                    V::G(id) => {
                        let kind = if op == "Squeeze" {
                            OpKind::Squeeze { axes }
                        } else {
                            OpKind::Unsqueeze { axes }
                        };
                        gv(self.op(kind, vec![id], at))
                    }
                }
            }
            "Concat" => {
                let axis = Self::attr_i(node, "axis", 1);
                let vals: Vec<V> = (0..node.input.len())
                    .map(|i| self.need(node, i))
                    .collect::<R<_>>()?;
                if let Some(c) = fold_concat(&vals, axis) {
                    return Ok(vec![V::C(Rc::new(c?))]);
                }
                let mut ids = Vec::new();
                for (i, v) in vals.iter().enumerate() {
                    ids.push(self.g(v, &Self::name_of(node, i))?);
                }
                gv(self.op(OpKind::Concat { axis }, ids, at))
            }
            // Tile: the input concatenated with itself `r` times along each axis repeated `r`
            // times (folded when the input is a constant); no kernel of its own.
            "Tile" => {
                let mut v = self.need(node, 0)?;
                let reps = self
                    .konst(node, 1, "the repeats")?
                    .ok_or("the repeats must be a constant")?
                    .as_ints();
                let rank = self.dims_of(&v)?.len();
                if reps.len() != rank {
                    return Err(format!(
                        "repeats {reps:?} need one number per axis of the rank-{rank} input"
                    ));
                }
                // Each repeat is one argument of a concatenation: bounded, so a huge count is
                // an error rather than a huge argument list.
                if reps.iter().any(|&r| !(1..=1024).contains(&r)) {
                    return Err(format!("repeats {reps:?} must be between 1 and 1024"));
                }
                let name = Self::name_of(node, 0);
                for (axis, &r) in reps.iter().enumerate() {
                    if r == 1 {
                        continue;
                    }
                    let copies = vec![v.clone(); r as usize];
                    v = match fold_concat(&copies, axis as i64) {
                        Some(c) => V::C(Rc::new(c?)),
                        None => {
                            let x = self.g(&v, &name)?;
                            V::G(self.op(
                                OpKind::Concat { axis: axis as i64 },
                                vec![x; copies.len()],
                                at,
                            ))
                        }
                    };
                }
                vec![v]
            }
            "Transpose" => {
                let v = self.need(node, 0)?;
                let perm = match Self::attr_ints(node, "perm") {
                    Some(p) => to_dims(&p, "perm")?,
                    None => (0..self.dims_of(&v)?.len()).rev().collect(),
                };
                let x = self.g(&v, &Self::name_of(node, 0))?;
                gv(self.op(OpKind::Transpose { perm }, vec![x], at))
            }
            "MatMul" => {
                let (a, b) = (x!(0), x!(1));
                gv(self.op(OpKind::MatMul, vec![a, b], at))
            }
            "Gemm" => gv(self.gemm(node, at)?),
            "Softmax" | "LogSoftmax" => {
                let log = op == "LogSoftmax";
                let v = self.need(node, 0)?;
                let dims = self.dims_of(&v)?;
                let x = self.g(&v, &Self::name_of(node, 0))?;
                let default = if self.opset < 13 { 1 } else { -1 };
                let axis = norm_axis(Self::attr_i(node, "axis", default), dims.len())?;
                if self.opset < 13 && axis + 1 != dims.len() {
                    // Before opset 13 the input is seen as 2-D: [before axis, from axis on].
                    let outer = product(&dims[..axis]).ok_or("the shape overflows")? as i64;
                    let flat = self.reshape(x, vec![outer, -1], at);
                    let s = self.op(OpKind::Softmax { axis: Some(1), log }, vec![flat], at);
                    let back = dims.iter().map(|&d| d as i64).collect();
                    gv(self.reshape(s, back, at))
                } else {
                    gv(self.op(
                        OpKind::Softmax {
                            axis: Some(axis as i64),
                            log,
                        },
                        vec![x],
                        at,
                    ))
                }
            }
            "ReduceSum" | "ReduceMean" | "ReduceMax" => {
                let kind = match op {
                    "ReduceSum" => ReduceKind::Sum,
                    "ReduceMean" => ReduceKind::Mean,
                    _ => ReduceKind::Max,
                };
                let x = x!(0);
                let mut axes = match self.konst(node, 1, "the axes")? {
                    Some(c) => c.as_ints(),
                    None => Self::attr_ints(node, "axes").unwrap_or_default(),
                };
                if axes.is_empty() {
                    if Self::attr_i(node, "noop_with_empty_axes", 0) != 0 {
                        return Ok(vec![V::G(x)]);
                    }
                    axes = (0..self.shape_of(x)?.rank() as i64).collect();
                }
                let keepdims = Self::attr_i(node, "keepdims", 1) != 0;
                gv(self.op(
                    OpKind::Reduce {
                        kind,
                        axes,
                        keepdims,
                    },
                    vec![x],
                    at,
                ))
            }
            "Gather" => {
                let axis = Self::attr_i(node, "axis", 0);
                let (data, idx) = (self.need(node, 0)?, self.need(node, 1)?);
                match (&data, &idx) {
                    (V::C(d), V::C(i)) => vec![V::C(Rc::new(fold_gather(d, i, axis)?))],
                    (_, V::C(i)) => {
                        let x = self.g(&data, &Self::name_of(node, 0))?;
                        let rank = self.shape_of(x)?.rank();
                        let a = norm_axis(axis, rank)?;
                        let indices = i.as_ints();
                        let y = self.op(
                            OpKind::Gather {
                                axis: a as i64,
                                indices: Some(indices),
                            },
                            vec![x],
                            at,
                        );
                        // The constant list is 1-D; other index ranks reshape its axis.
                        if i.dims.len() == 1 {
                            gv(y)
                        } else {
                            let mut dims = self.shape_of(x)?.dims;
                            dims.splice(a..=a, i.dims.iter().copied());
                            gv(self.reshape(y, dims.iter().map(|&d| d as i64).collect(), at))
                        }
                    }
                    _ => {
                        let x = self.g(&data, &Self::name_of(node, 0))?;
                        let i = self.g(&idx, &Self::name_of(node, 1))?;
                        gv(self.op(
                            OpKind::Gather {
                                axis,
                                indices: None,
                            },
                            vec![x, i],
                            at,
                        ))
                    }
                }
            }
            "Slice" => {
                let (starts, ends, axes, steps) = if self.opset < 10 {
                    (
                        Self::attr_ints(node, "starts").ok_or("starts is missing")?,
                        Self::attr_ints(node, "ends").ok_or("ends is missing")?,
                        Self::attr_ints(node, "axes").unwrap_or_default(),
                        Vec::new(),
                    )
                } else {
                    let get = |this: &Self, i, what| -> R<Vec<i64>> {
                        Ok(this
                            .konst(node, i, what)?
                            .map(|c| c.as_ints())
                            .unwrap_or_default())
                    };
                    (
                        get(self, 1, "the starts")?,
                        get(self, 2, "the ends")?,
                        get(self, 3, "the axes")?,
                        get(self, 4, "the steps")?,
                    )
                };
                let v = self.need(node, 0)?;
                if let V::C(c) = &v {
                    if c.dims.len() == 1 && axes.iter().all(|&a| a == 0 || a == -1) {
                        return Ok(vec![V::C(Rc::new(fold_slice(c, &starts, &ends, &steps)))]);
                    }
                }
                let x = self.g(&v, &Self::name_of(node, 0))?;
                gv(self.op(
                    OpKind::Slice {
                        starts,
                        ends,
                        axes,
                        steps,
                    },
                    vec![x],
                    at,
                ))
            }
            "Split" => {
                let v = self.need(node, 0)?;
                let dims = self.dims_of(&v)?;
                let axis = norm_axis(Self::attr_i(node, "axis", 0), dims.len())?;
                let parts = node.output.len();
                let sizes = match self.konst(node, 1, "the split sizes")? {
                    Some(c) => to_dims(&c.as_ints(), "split")?,
                    None => match Self::attr_ints(node, "split") {
                        Some(s) => to_dims(&s, "split")?,
                        None => {
                            let n = dims[axis];
                            let each = n.div_ceil(parts.max(1));
                            (0..parts)
                                .map(|k| each.min(n.saturating_sub(k * each)))
                                .collect()
                        }
                    },
                };
                let x = self.g(&v, &Self::name_of(node, 0))?;
                let n = sizes.len();
                let locs = vec![at];
                self.graph
                    .add_op(
                        OpKind::Split {
                            axis: axis as i64,
                            sizes,
                        },
                        vec![x],
                        n,
                        at,
                        locs,
                        None,
                    )
                    .into_iter()
                    .map(V::G)
                    .collect()
            }
            "Pad" => {
                let mode = Self::attr_s(node, "mode");
                if !matches!(mode.as_str(), "" | "constant" | "reflect" | "edge") {
                    return Err(format!(
                        "Pad mode `{mode}` is not supported (`constant`, `reflect`, `edge` are)"
                    ));
                }
                let pads = match self.konst(node, 1, "the pads")? {
                    Some(c) => c.as_ints(),
                    None => Self::attr_ints(node, "pads")
                        .or_else(|| Self::attr_ints(node, "paddings"))
                        .ok_or("the pads are missing")?,
                };
                let value = match self.konst(node, 2, "the value")? {
                    Some(c) => c.as_floats().first().copied().unwrap_or(0.0),
                    None => Self::attr_f(node, "value", 0.0),
                };
                if self.arg(node, 3)?.is_some() {
                    return Err("Pad with axes is not supported".into());
                }
                let x = x!(0);
                let pads = to_dims(&pads, "the pads (negative pads crop)")?;
                if mode == "reflect" || mode == "edge" {
                    return Ok(gv(self.pad_copies(x, &pads, mode == "reflect", at)?));
                }
                match pads[..] {
                    [0, 0, t, l, 0, 0, b, r] => gv(self.op(
                        OpKind::Pad { pad: [t, l, b, r], value },
                        vec![x],
                        at,
                    )),
                    _ => return Err(format!(
                        "Pad {pads:?} is not supported: kiln pads the last two axes of a rank-4 tensor"
                    )),
                }
            }
            "DepthToSpace" => {
                let x = x!(0);
                let d = self.shape_of(x)?.dims;
                let b = Self::attr_i(node, "blocksize", 0);
                let [n, c, h, w] = d[..] else {
                    return Err("DepthToSpace needs a rank-4 input".into());
                };
                let (n, c, h, w) = (n as i64, c as i64, h as i64, w as i64);
                if b < 1 || c % (b * b) != 0 {
                    return Err(format!("blocksize {b} does not divide the {c} channels"));
                }
                let (s, perm) = if Self::attr_s(node, "mode") == "CRD" {
                    (vec![n, c / (b * b), b, b, h, w], vec![0, 1, 4, 2, 5, 3])
                } else {
                    (vec![n, b, b, c / (b * b), h, w], vec![0, 3, 4, 1, 5, 2])
                };
                let r = self.reshape(x, s, at);
                let t = self.op(OpKind::Transpose { perm }, vec![r], at);
                gv(self.reshape(t, vec![n, c / (b * b), h * b, w * b], at))
            }
            "NonZero" => {
                let x = x!(0);
                gv(self.op(OpKind::NonZero, vec![x], at))
            }
            other => return Err(format!("unsupported operator `{other}`")),
        })
    }

    fn reshape_v(&mut self, v: V, name: &str, shape: Vec<i64>, at: Loc) -> R<Vec<V>> {
        if let V::C(c) = &v {
            let dims = reshape_dims(&c.dims, &shape)?;
            return Ok(vec![V::C(Rc::new(Const {
                dims,
                ..(**c).clone()
            }))]);
        }
        let x = self.g(&v, name)?;
        Ok(vec![V::G(self.reshape(x, shape, at))])
    }

    /// `pads` / `auto_pad` of a conv or pool over `n` spatial dimensions.
    fn padding(&self, node: &pb::NodeProto, n: usize) -> R<Padding> {
        match Self::attr_s(node, "auto_pad").as_str() {
            "" | "NOTSET" => {}
            "VALID" => return Ok(Padding::Explicit(vec![0; 2 * n])),
            "SAME_UPPER" => return Ok(Padding::Same),
            other => return Err(format!("auto_pad = {other} is not supported")),
        }
        match Self::attr_ints(node, "pads") {
            Some(p) if p.len() == 2 * n => Ok(Padding::Explicit(to_dims(&p, "pads")?)),
            Some(p) => Err(format!("pads {p:?} needs {} numbers", 2 * n)),
            None => Ok(Padding::Explicit(vec![0; 2 * n])),
        }
    }

    /// A window attribute with one size per spatial dimension (`strides`, `dilations`), 1s when
    /// it is absent.
    fn per_dim(node: &pb::NodeProto, name: &str, n: usize) -> R<Vec<usize>> {
        match Self::attr_ints(node, name) {
            Some(s) if s.len() == n => to_dims(&s, name),
            Some(s) => Err(format!("{name} {s:?} needs {n} numbers")),
            None => Ok(vec![1; n]),
        }
    }

    /// What `Conv` and `ConvTranspose` share: the input, the weights (`[a, b, k...]`, 1- to 3-D),
    /// `kernel_shape` (which must agree with them), `strides`, `dilations` and `group`, which must
    /// divide `wd[0]`, the weights' first dimension (`channels` names it in the error). `what`
    /// names the op in errors.
    fn conv_window(&mut self, node: &pb::NodeProto, what: &str, channels: &str) -> R<ConvWindow> {
        let v = self.need(node, 0)?;
        let x = self.g(&v, &Self::name_of(node, 0))?;
        let (w, wd) = self.weight(node, 1, "the weights")?;
        if !(3..=5).contains(&wd.len()) {
            return Err(format!(
                "weights of shape {wd:?}: kiln has 1-, 2- and 3-D {what}"
            ));
        }
        let n = wd.len() - 2;
        let kernel = match Self::attr_ints(node, "kernel_shape") {
            Some(k) => to_dims(&k, "kernel_shape")?,
            None => wd[2..].to_vec(),
        };
        if kernel != wd[2..] {
            return Err(format!(
                "kernel_shape {kernel:?} differs from the weights' {wd:?}"
            ));
        }
        let stride = Self::per_dim(node, "strides", n)?;
        let dilation = Self::per_dim(node, "dilations", n)?;
        if stride.contains(&0) || dilation.contains(&0) || kernel.contains(&0) {
            return Err("strides, dilations and kernel sizes must be at least 1".into());
        }
        let groups = usize::try_from(Self::attr_i(node, "group", 1))
            .ok()
            .filter(|&g| g >= 1 && wd[0] % g == 0)
            .ok_or_else(|| {
                format!("group must be at least 1 and divide the {channels} channels")
            })?;
        Ok(ConvWindow {
            x,
            w,
            wd,
            n,
            kernel,
            stride,
            dilation,
            groups,
        })
    }

    /// The arguments of a convolution: input, weights and, if the node has one, its bias.
    fn conv_args(
        &mut self,
        node: &pb::NodeProto,
        x: ValueId,
        w: ValueId,
    ) -> R<(Vec<ValueId>, bool)> {
        let mut args = vec![x, w];
        let has_bias = self.arg(node, 2)?.is_some();
        if has_bias {
            args.push(self.weight(node, 2, "the bias")?.0);
        }
        Ok((args, has_bias))
    }

    fn conv(&mut self, node: &pb::NodeProto, at: Loc) -> R<ValueId> {
        let ConvWindow {
            x,
            w,
            wd,
            n,
            kernel,
            stride,
            dilation,
            groups,
        } = self.conv_window(node, "convolutions", "output")?;
        let pad = self.padding(node, n)?;
        let (args, has_bias) = self.conv_args(node, x, w)?;
        let locs = vec![at; args.len()];
        Ok(self.graph.add_op(
            OpKind::Conv {
                c_in: wd[1] * groups,
                kernel,
                stride,
                dilation,
                pad,
                groups,
                has_bias,
                bn: None,
                residual: false,
                act: Act::None,
            },
            args,
            1,
            at,
            locs,
            None,
        )[0])
    }

    /// `ConvTranspose`: the weights are `[c_in, c_out / group, k...]`. An `output_shape` (or
    /// `auto_pad` SAME_*, whose output is the input times the stride) becomes the `pads` that
    /// give it, by ONNX's rule (the odd unit at the end for SAME_UPPER, at the start otherwise).
    fn conv_transpose(&mut self, node: &pb::NodeProto, at: Loc) -> R<ValueId> {
        let ConvWindow {
            x,
            w,
            wd,
            n,
            kernel,
            stride,
            dilation,
            groups,
        } = self.conv_window(node, "transposed convolutions", "input")?;
        let output_padding = match Self::attr_ints(node, "output_padding") {
            Some(_) => Self::per_dim(node, "output_padding", n)?,
            None => vec![0; n],
        };
        let auto_pad = Self::attr_s(node, "auto_pad");
        let wanted = match (Self::attr_ints(node, "output_shape"), auto_pad.as_str()) {
            (Some(s), _) => {
                // Either the spatial sizes or the whole shape.
                let s = to_dims(&s, "output_shape")?;
                Some(s[s.len().saturating_sub(n)..].to_vec())
            }
            (None, "SAME_UPPER" | "SAME_LOWER") => {
                let dims = self.shape_of(x)?.dims;
                let sp = dims.get(2..).ok_or("the input has no spatial dimensions")?;
                let prod = sp.iter().zip(&stride).map(|(&i, &s)| i.checked_mul(s));
                Some(
                    prod.collect::<Option<Vec<_>>>()
                        .ok_or("the shape overflows")?,
                )
            }
            _ => None,
        };
        let pad = match wanted {
            Some(out) if out.len() == n => {
                let dims = self.shape_of(x)?.dims;
                let sp = dims.get(2..).filter(|s| s.len() == n).ok_or_else(|| {
                    format!("the input {dims:?} does not have {n} spatial dimensions")
                })?;
                let mut pads = vec![0; 2 * n];
                for d in 0..n {
                    let full = sp[d]
                        .checked_sub(1)
                        .and_then(|v| v.checked_mul(stride[d]))
                        .and_then(|v| v.checked_add((kernel[d] - 1).checked_mul(dilation[d])?))
                        .and_then(|v| v.checked_add(output_padding[d])?.checked_add(1))
                        .ok_or("the output size overflows or the input is empty")?;
                    let total = full.checked_sub(out[d]).ok_or_else(|| {
                        format!("output_shape {out:?} is larger than the full result ({full} along dimension {d})")
                    })?;
                    let (small, large) = (total / 2, total - total / 2);
                    (pads[d], pads[d + n]) = if auto_pad == "SAME_UPPER" {
                        (small, large)
                    } else {
                        (large, small)
                    };
                }
                Padding::Explicit(pads)
            }
            Some(out) => return Err(format!("output_shape {out:?} needs {n} sizes")),
            None => self.padding(node, n)?,
        };
        let (args, has_bias) = self.conv_args(node, x, w)?;
        let locs = vec![at; args.len()];
        Ok(self.graph.add_op(
            OpKind::ConvTranspose {
                c_in: wd[0],
                kernel,
                stride,
                dilation,
                pad,
                output_padding,
                groups,
                has_bias,
            },
            args,
            1,
            at,
            locs,
            None,
        )[0])
    }

    /// `Gemm`: a dense layer when `B` is a constant (transposed at compile time if needed) and
    /// `C` a bias vector; otherwise transposes, a matmul and arithmetic.
    fn gemm(&mut self, node: &pb::NodeProto, at: Loc) -> R<ValueId> {
        let alpha = Self::attr_f(node, "alpha", 1.0);
        let beta = Self::attr_f(node, "beta", 1.0);
        let ta = Self::attr_i(node, "transA", 0) != 0;
        let tb = Self::attr_i(node, "transB", 0) != 0;
        let a = self.need(node, 0)?;
        let b = self.need(node, 1)?;
        let c = self.arg(node, 2)?;
        let mut x = self.g(&a, &Self::name_of(node, 0))?;
        if ta {
            x = self.op(OpKind::Transpose { perm: vec![1, 0] }, vec![x], at);
        }
        let bias_ok = |c: &Option<V>| match c {
            None => true,
            Some(V::C(c)) => c.dims.len() == 1 && matches!(c.data, Data::F(_)),
            _ => false,
        };
        if let (V::C(bc), true, true) = (&b, alpha == 1.0 && beta == 1.0, bias_ok(&c)) {
            if let (&[k, n], Data::F(data)) = (&bc.dims[..], &bc.data) {
                // Dense weights are [out, in]: B^T.
                // The model's tensor when `B` is a view of one (same elements, same order).
                let name = bc
                    .src
                    .as_deref()
                    .map_or_else(|| Self::name_of(node, 1), |(key, _)| key.clone());
                let (key, w) = if tb {
                    (name, data.clone())
                } else {
                    let mut t = vec![0.0; k * n];
                    for i in 0..k {
                        for j in 0..n {
                            t[j * k + i] = data[i * n + j];
                        }
                    }
                    (format!("{name}^T"), t)
                };
                let (out, inp) = if tb { (k, n) } else { (n, k) };
                let wid = self.param(&key, vec![out, inp], w, at);
                let mut args = vec![x, wid];
                if let Some(V::C(cc)) = &c {
                    let key = Self::name_of(node, 2);
                    let bias = if cc.dims == [out] {
                        cc.as_floats()
                    } else if cc.len() == 1 {
                        vec![cc.as_floats()[0]; out]
                    } else {
                        return Err(format!("the bias {:?} must have {out} values", cc.dims));
                    };
                    args.push(self.param(&key, vec![out], bias, at));
                }
                let has_bias = args.len() == 3;
                let locs = vec![at; args.len()];
                return Ok(self.graph.add_op(
                    OpKind::Dense {
                        has_bias,
                        bn: None,
                        act: Act::None,
                    },
                    args,
                    1,
                    at,
                    locs,
                    None,
                )[0]);
            }
        }
        let mut y = self.g(&b, &Self::name_of(node, 1))?;
        if tb {
            y = self.op(OpKind::Transpose { perm: vec![1, 0] }, vec![y], at);
        }
        let mut r = self.op(OpKind::MatMul, vec![x, y], at);
        if alpha != 1.0 {
            let k = self.scalar(alpha, at);
            r = self.bin(BinOp::Mul, r, k, at);
        }
        if let Some(c) = c {
            let mut cv = self.g(&c, &Self::name_of(node, 2))?;
            if beta != 1.0 {
                let k = self.scalar(beta, at);
                cv = self.bin(BinOp::Mul, cv, k, at);
            }
            r = self.bin(BinOp::Add, r, cv, at);
        }
        Ok(r)
    }

    /// `reflect` / `edge` padding from slices and concats, one axis after the other: reflect
    /// takes the `b` elements after the first in reverse (a slice with step -1) before and the
    /// `e` before the last after; edge repeats the first and last element.
    fn pad_copies(&mut self, mut x: ValueId, pads: &[usize], reflect: bool, at: Loc) -> R<ValueId> {
        let dims = self.shape_of(x)?.dims;
        let rank = dims.len();
        if pads.len() != 2 * rank {
            return Err(format!("pads {pads:?} needs {} numbers", 2 * rank));
        }
        for (a, &n) in dims.iter().enumerate() {
            let (b, e) = (pads[a], pads[a + rank]);
            if b == 0 && e == 0 {
                continue;
            }
            let (n, bi, ei) = (n as i64, b as i64, e as i64);
            if reflect && (bi >= n || ei >= n) {
                return Err(format!(
                    "reflect padding of {b}/{e} needs more than {n} elements on axis {a}"
                ));
            }
            let src = x;
            let slice = |this: &mut Self, start: i64, end: i64, step: i64| {
                let kind = OpKind::Slice {
                    starts: vec![start],
                    ends: vec![end],
                    axes: vec![a as i64],
                    steps: vec![step],
                };
                this.op(kind, vec![src], at)
            };
            let mut parts = Vec::new();
            if b > 0 {
                if reflect {
                    parts.push(slice(self, bi, 0, -1));
                } else {
                    let first = slice(self, 0, 1, 1);
                    parts.extend(std::iter::repeat_n(first, b));
                }
            }
            parts.push(src);
            if e > 0 {
                if reflect {
                    // An end below -n clamps to "before the first element".
                    parts.push(slice(self, n - 2, n - 2 - ei - n, -1));
                } else {
                    let last = slice(self, n - 1, n, 1);
                    parts.extend(std::iter::repeat_n(last, e));
                }
            }
            x = self.op(OpKind::Concat { axis: a as i64 }, parts, at);
        }
        Ok(x)
    }

    /// `gamma * elu(x, alpha)` from relu, exp and arithmetic.
    fn elu(&mut self, x: ValueId, alpha: f32, gamma: f32, at: Loc) -> ValueId {
        let pos = self.unary(Act::Relu, x, at);
        let neg_x = self.math(MathOp::Neg, x, at);
        let r = self.unary(Act::Relu, neg_x, at);
        let min0 = self.math(MathOp::Neg, r, at);
        let e = self.math(MathOp::Exp, min0, at);
        let one = self.scalar(1.0, at);
        let em1 = self.bin(BinOp::Sub, e, one, at);
        let a = self.scalar(alpha, at);
        let neg = self.bin(BinOp::Mul, em1, a, at);
        let y = self.bin(BinOp::Add, pos, neg, at);
        if gamma == 1.0 {
            y
        } else {
            let g = self.scalar(gamma, at);
            self.bin(BinOp::Mul, y, g, at)
        }
    }

    /// `LRN`: `x / (bias + alpha / size * sum of x² over `size` channels)^beta`. The channel
    /// window sum is an average pool over a `[N, 1, C, H*W]` view (padding counted, so the
    /// average is the sum over `size`), and the power is `exp(-beta * log(...))`.
    fn lrn(&mut self, node: &pb::NodeProto, at: Loc) -> R<ValueId> {
        let x = {
            let v = self.need(node, 0)?;
            self.g(&v, &Self::name_of(node, 0))?
        };
        let d = self.shape_of(x)?.dims;
        if d.len() < 3 {
            return Err("LRN needs an input of rank 3 or more".into());
        }
        let size = usize::try_from(Self::attr_i(node, "size", 0))
            .ok()
            .filter(|&s| s >= 1)
            .ok_or("size must be at least 1")?;
        let alpha = Self::attr_f(node, "alpha", 1e-4);
        let beta = Self::attr_f(node, "beta", 0.75);
        let bias = Self::attr_f(node, "bias", 1.0);
        let rest = product(&d[2..]).ok_or("the shape overflows")?;
        let sq = self.bin(BinOp::Mul, x, x, at);
        let v = self.reshape(sq, vec![d[0] as i64, 1, d[1] as i64, rest as i64], at);
        let (lo, hi) = ((size - 1) / 2, size / 2);
        let avg = self.op(
            OpKind::Pool {
                kind: PoolKind::Avg,
                kernel: vec![size, 1],
                stride: vec![1, 1],
                dilation: vec![1, 1],
                pad: Padding::Explicit(vec![lo, 0, hi, 0]),
                count_include_pad: true,
            },
            vec![v],
            at,
        );
        let avg = self.reshape(avg, d.iter().map(|&s| s as i64).collect(), at);
        let a = self.scalar(alpha, at);
        let t = self.bin(BinOp::Mul, avg, a, at);
        let b = self.scalar(bias, at);
        let t = self.bin(BinOp::Add, t, b, at);
        let l = self.math(MathOp::Log, t, at);
        let nb = self.scalar(-beta, at);
        let l = self.bin(BinOp::Mul, l, nb, at);
        let p = self.math(MathOp::Exp, l, at);
        Ok(self.bin(BinOp::Mul, x, p, at))
    }
}

/// Elementwise arithmetic on two constants with numpy broadcasting (shape chains: `Mul` of a
/// size by 2, `Div` of a size by a group count). `None` when a size does not broadcast.
fn fold_binary(op: BinOp, a: &Const, b: &Const) -> Option<Const> {
    let rank = a.dims.len().max(b.dims.len());
    let pad = |d: &[usize]| {
        let mut v = vec![1; rank - d.len()];
        v.extend_from_slice(d);
        v
    };
    let (da, db) = (pad(&a.dims), pad(&b.dims));
    let mut out = Vec::with_capacity(rank);
    for (&x, &y) in da.iter().zip(&db) {
        out.push(match (x, y) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        });
    }
    let n = product(&out).filter(|&n| n <= MAX_CONST_ELEMENTS)?;
    let index = |dims: &[usize], mut flat: usize| {
        // The element of a broadcast operand at the output's flat index.
        let mut idx = 0;
        let mut stride = 1;
        for k in (0..rank).rev() {
            let coord = flat % out[k];
            flat /= out[k];
            if dims[k] != 1 {
                idx += coord * stride;
            }
            stride *= dims[k];
        }
        idx
    };
    let float = matches!(a.data, Data::F(_)) || matches!(b.data, Data::F(_));
    let data = if float {
        let (va, vb) = (a.as_floats(), b.as_floats());
        Data::F(
            (0..n)
                .map(|i| {
                    let (x, y) = (va[index(&da, i)], vb[index(&db, i)]);
                    match op {
                        BinOp::Add => x + y,
                        BinOp::Sub => x - y,
                        BinOp::Mul => x * y,
                        BinOp::Div => x / y,
                    }
                })
                .collect(),
        )
    } else {
        let (va, vb) = (a.as_ints(), b.as_ints());
        Data::I(
            (0..n)
                .map(|i| {
                    let (x, y) = (va[index(&da, i)], vb[index(&db, i)]);
                    match op {
                        BinOp::Add => x.wrapping_add(y),
                        BinOp::Sub => x.wrapping_sub(y),
                        BinOp::Mul => x.wrapping_mul(y),
                        BinOp::Div => x.checked_div(y).unwrap_or(0),
                    }
                })
                .collect(),
        )
    };
    Some(Const {
        dtype: if float { DType::F32 } else { a.dtype },
        dims: out,
        data,
        src: None,
    })
}

/// A `Concat` of constants (1-D or along axis 0), `None` if some input is a run-time value.
fn fold_concat(vals: &[V], axis: i64) -> Option<R<Const>> {
    let cs: Vec<&Rc<Const>> = vals
        .iter()
        .map(|v| match v {
            V::C(c) => Some(c),
            V::G(_) => None,
        })
        .collect::<Option<_>>()?;
    let first = cs.first()?;
    if first.dims.len() != 1 || !(axis == 0 || axis == -1) {
        return Some(Err(
            "Concat of constants is supported for 1-D tensors only".into()
        ));
    }
    let float = cs.iter().any(|c| matches!(c.data, Data::F(_)));
    let data = if float {
        Data::F(cs.iter().flat_map(|c| c.as_floats()).collect())
    } else {
        Data::I(cs.iter().flat_map(|c| c.as_ints()).collect())
    };
    let len = match &data {
        Data::F(v) => v.len(),
        Data::I(v) => v.len(),
    };
    Some(Ok(Const {
        dtype: first.dtype,
        dims: vec![len],
        data,
        src: None,
    }))
}

/// `Gather` of a constant by constant indices.
fn fold_gather(d: &Const, i: &Const, axis: i64) -> R<Const> {
    let a = norm_axis(axis, d.dims.len())?;
    let n = d.dims[a];
    let outer: usize = d.dims[..a].iter().product();
    let inner: usize = d.dims[a + 1..].iter().product();
    let mut idx = Vec::new();
    let picks: Vec<usize> = i
        .as_ints()
        .iter()
        .map(|&k| {
            let k = if k < 0 { k + n as i64 } else { k };
            usize::try_from(k)
                .ok()
                .filter(|&k| k < n)
                .ok_or_else(|| format!("index {k} is out of range for a size of {n}"))
        })
        .collect::<R<_>>()?;
    for o in 0..outer {
        for &k in &picks {
            for j in 0..inner {
                idx.push((o * n + k) * inner + j);
            }
        }
    }
    let mut dims = d.dims[..a].to_vec();
    dims.extend(&i.dims);
    dims.extend(&d.dims[a + 1..]);
    Ok(d.with(dims, &idx))
}

/// A 1-D `Slice` of a constant, clamped as ONNX does.
fn fold_slice(c: &Const, starts: &[i64], ends: &[i64], steps: &[i64]) -> Const {
    let n = c.dims[0] as i64;
    let step = steps.first().copied().unwrap_or(1);
    let clamp = |v: i64, lo: i64, hi: i64| (if v < 0 { v + n } else { v }).clamp(lo, hi);
    let mut idx = Vec::new();
    if step > 0 {
        let (s, e) = (
            clamp(starts.first().copied().unwrap_or(0), 0, n),
            clamp(ends.first().copied().unwrap_or(n), 0, n),
        );
        let mut k = s;
        while k < e {
            idx.push(k as usize);
            k += step;
        }
    } else if step < 0 {
        let (s, e) = (
            clamp(starts.first().copied().unwrap_or(n - 1), -1, n - 1),
            clamp(ends.first().copied().unwrap_or(-1), -1, n - 1),
        );
        let mut k = s;
        while k > e {
            idx.push(k as usize);
            k += step;
        }
    }
    c.with(vec![idx.len()], &idx)
}

/// ONNX `Reshape` sizes on a constant (`0` copies, one `-1` is inferred).
fn reshape_dims(dims: &[usize], shape: &[i64]) -> R<Vec<usize>> {
    let total = product(dims).ok_or("the shape overflows")?;
    let mut out = Vec::new();
    let mut infer = None;
    for (i, &s) in shape.iter().enumerate() {
        match s {
            0 => out.push(*dims.get(i).ok_or("0 in a reshape past the input's rank")?),
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            s if s > 0 => out.push(s as usize),
            s => return Err(format!("reshape size {s} is not valid")),
        }
    }
    let known = product(&out)
        .filter(|&k| k > 0)
        .ok_or("the shape overflows")?;
    if let Some(i) = infer {
        out[i] = total / known;
    }
    if product(&out) != Some(total) {
        return Err(format!("cannot reshape {dims:?} to {shape:?}"));
    }
    Ok(out)
}

fn squeeze_dims(dims: &[usize], axes: &[i64]) -> R<Vec<usize>> {
    let axes: Vec<usize> = axes
        .iter()
        .map(|&a| norm_axis(a, dims.len()))
        .collect::<R<_>>()?;
    Ok(dims
        .iter()
        .enumerate()
        .filter(|(i, &d)| {
            !(if axes.is_empty() {
                d == 1
            } else {
                axes.contains(i)
            })
        })
        .map(|(_, &d)| d)
        .collect())
}

fn unsqueeze_dims(dims: &[usize], axes: &[i64]) -> R<Vec<usize>> {
    let rank = dims.len() + axes.len();
    let axes: Vec<usize> = axes.iter().map(|&a| norm_axis(a, rank)).collect::<R<_>>()?;
    let mut src = dims.iter();
    Ok((0..rank)
        .map(|i| {
            if axes.contains(&i) {
                1
            } else {
                src.next().copied().unwrap_or(1)
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_chain_folds() {
        let shape = Const::ints(vec![4], vec![2, 3, 4, 5]);
        let g = fold_gather(&shape, &Const::ints(vec![1], vec![0]), 0).unwrap();
        assert_eq!(g.as_ints(), vec![2]);
        let minus = Const::ints(vec![1], vec![-1]);
        let c = fold_concat(&[V::C(Rc::new(g)), V::C(Rc::new(minus))], 0)
            .unwrap()
            .unwrap();
        assert_eq!(c.as_ints(), vec![2, -1]);
        assert_eq!(
            reshape_dims(&[2, 3, 4, 5], &c.as_ints()).unwrap(),
            vec![2, 60]
        );
    }

    #[test]
    fn broadcast_folds() {
        let a = Const::ints(vec![2, 1], vec![1, 2]);
        let b = Const::ints(vec![3], vec![10, 20, 30]);
        let c = fold_binary(BinOp::Mul, &a, &b).unwrap();
        assert_eq!(c.dims, vec![2, 3]);
        assert_eq!(c.as_ints(), vec![10, 20, 30, 20, 40, 60]);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut errors = Errors::default();
        import(&[0xff, 0xff, 0xff, 0x01, 0x02], Path::new("."), &mut errors);
        assert!(!errors.is_empty());
    }
}
