//! The IR's stable text form, for snapshot tests per stage and for internal-error reports.
//!
//! ```text
//! %0 x = input 0 : f32[1,1,8,8]
//! %1 = param "conv1.weight" : f32[16,1,3,3]
//! %3 h = conv2d(%0, %1, %2) {c_in=1 kernel=3x3 stride=1x1 dilation=1x1 pad=same groups=1} : f32[1,16,8,8]
//! return %9
//! ```
//!
//! One line per value that is not an op result (inputs and parameters, in id order, first),
//! then one per op, then the outputs. Types appear once the graph is typed. The format only
//! changes on purpose: snapshots in `model-dsl/tests/snapshots/*.ir` pin it.

use std::fmt::{self, Write as _};

use super::{Act, Graph, OpKind, Padding, Producer, ReshapeTo, Shape, ValueId};

/// The graph as text.
pub fn print(g: &Graph) -> String {
    let mut out = String::new();
    let name = |v: ValueId| -> String {
        match &g.values[v.index()].name {
            Some(n) => format!("%{} {n}", v.0),
            None => format!("%{}", v.0),
        }
    };
    let ty = |v: ValueId| -> String {
        if let Some(s) = g.seq(v) {
            let elems: Vec<String> = s
                .elems
                .iter()
                .map(|e| match e.offset {
                    0 => format!("%{}", e.base.0),
                    k => format!("%{}+{k}", e.base.0),
                })
                .collect();
            let order = if s.run_order { " order=run" } else { "" };
            return format!(" : {} [{}]{order}", s.type_text(), elems.join(", "));
        }
        match g.types.get(v.index()) {
            Some(s) => format!(" : {}", dims(s)),
            None => String::new(),
        }
    };
    for (i, v) in g.values.iter().enumerate() {
        let id = ValueId(i as u32);
        match v.producer {
            Producer::Input(n) => {
                let _ = writeln!(out, "{} = input {n}{}", name(id), ty(id));
            }
            Producer::Param(p) => {
                let _ = writeln!(
                    out,
                    "{} = param {:?}{}",
                    name(id),
                    g.params[p.index()].key,
                    ty(id)
                );
            }
            Producer::Op { .. } => {}
        }
    }
    for op in &g.ops {
        let results: Vec<String> = op.results.iter().map(|r| name(*r)).collect();
        let args: Vec<String> = op.args.iter().map(|a| format!("%{}", a.0)).collect();
        let types: Vec<String> = op.results.iter().map(|r| ty(*r)).collect();
        let _ = writeln!(
            out,
            "{} = {}({}){}{}",
            results.join(", "),
            op.kind.name(),
            args.join(", "),
            Attrs(&op.kind),
            types.concat()
        );
    }
    let outs: Vec<String> = g
        .outputs
        .iter()
        .map(|o| format!("%{}", o.value.0))
        .collect();
    let _ = writeln!(out, "return {}", outs.join(", "));
    out
}

/// `f32[1,16,8,8]`: the shape without the DSL's spelling; a run-time size `k` bounded by `n` is
/// `?k<=n`.
fn dims(s: &Shape) -> String {
    let d: Vec<String> = s
        .dims
        .iter()
        .enumerate()
        .map(|(i, d)| match s.run_dim(i) {
            Some(k) if *d == 0 => format!("?{k}"),
            Some(k) => format!("?{k}<={d}"),
            None => d.to_string(),
        })
        .collect();
    format!("{}[{}]", s.dtype, d.join(","))
}

/// An op's attributes, ` {key=value ...}`, or nothing.
struct Attrs<'a>(&'a OpKind);

impl fmt::Display for Attrs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items: Vec<String> = Vec::new();
        let sizes = |p: &[usize]| join(p, "x");
        let pad = |p: &Padding| match p {
            Padding::Same => "same".to_string(),
            Padding::Explicit(p) => join(p, ","),
            Padding::Written(p) => format!("written({})", join(p, ",")),
        };
        let act = |a: &Act, items: &mut Vec<String>| {
            if *a != Act::None {
                items.push(format!("act={}", act_text(a)));
            }
        };
        match self.0 {
            OpKind::Conv {
                c_in,
                kernel,
                stride,
                dilation,
                pad: p,
                groups,
                has_bias,
                bn,
                residual,
                act: a,
            } => {
                items.push(format!("c_in={c_in}"));
                items.push(format!("kernel={}", sizes(kernel)));
                items.push(format!("stride={}", sizes(stride)));
                items.push(format!("dilation={}", sizes(dilation)));
                items.push(format!("pad={}", pad(p)));
                items.push(format!("groups={groups}"));
                items.push(format!("bias={has_bias}"));
                if let Some(eps) = bn {
                    items.push(format!("bn_eps={eps:?}"));
                }
                if *residual {
                    items.push("residual".to_string());
                }
                act(a, &mut items);
            }
            OpKind::ConvTranspose {
                c_in,
                kernel,
                stride,
                dilation,
                pad: p,
                output_padding,
                groups,
                has_bias,
            } => {
                items.push(format!("c_in={c_in}"));
                items.push(format!("kernel={}", sizes(kernel)));
                items.push(format!("stride={}", sizes(stride)));
                items.push(format!("dilation={}", sizes(dilation)));
                items.push(format!("pad={}", pad(p)));
                items.push(format!("output_padding={}", sizes(output_padding)));
                items.push(format!("groups={groups}"));
                items.push(format!("bias={has_bias}"));
            }
            OpKind::Dense {
                has_bias,
                bn,
                act: a,
            } => {
                items.push(format!("bias={has_bias}"));
                if let Some(eps) = bn {
                    items.push(format!("bn_eps={eps:?}"));
                }
                act(a, &mut items);
            }
            OpKind::BatchNorm { eps, act: a } => {
                items.push(format!("eps={eps:?}"));
                act(a, &mut items);
            }
            OpKind::Unary(a) => items.push(act_text(a)),
            OpKind::Pool {
                kernel,
                stride,
                dilation,
                pad: p,
                count_include_pad,
                ..
            } => {
                items.push(format!("kernel={}", sizes(kernel)));
                items.push(format!("stride={}", sizes(stride)));
                if dilation.iter().any(|&d| d != 1) {
                    items.push(format!("dilation={}", sizes(dilation)));
                }
                items.push(format!("pad={}", pad(p)));
                if *count_include_pad {
                    items.push("count_include_pad".into());
                }
            }
            OpKind::Reshape(ReshapeTo::Type { ty, batch_given }) => {
                let d: Vec<String> = ty
                    .dims
                    .iter()
                    .enumerate()
                    .map(|(i, d)| match d {
                        _ if i == 0 && !batch_given => "batch".to_string(),
                        super::Dim::Known(n) => n.to_string(),
                        super::Dim::Sym(s) => format!("${}", s.0),
                        super::Dim::Any => "?".to_string(),
                    })
                    .collect();
                items.push(format!("to={}[{}]", ty.dtype, d.join(",")));
            }
            OpKind::Pad { pad: p, value } => {
                items.push(format!("pad={},{},{},{}", p[0], p[1], p[2], p[3]));
                items.push(format!("value={value:?}"));
            }
            OpKind::Reshape(ReshapeTo::Dims(d)) => items.push(format!("to={d:?}")),
            OpKind::Concat { axis } => items.push(format!("axis={axis}")),
            OpKind::Softmax { axis, .. } => {
                if let Some(a) = axis {
                    items.push(format!("axis={a}"));
                }
            }
            OpKind::Transpose { perm } => items.push(format!("perm={perm:?}")),
            OpKind::Reduce { axes, keepdims, .. } => {
                items.push(format!("axes={axes:?}"));
                items.push(format!("keepdims={keepdims}"));
            }
            OpKind::Constant(v) => items.push(format!("value={v:?}")),
            OpKind::Cast(d) => items.push(format!("to={d}")),
            OpKind::SliceDyn { axes } => items.push(format!("axes={axes:?}")),
            OpKind::NonZero | OpKind::Range | OpKind::Compare(_) | OpKind::Pow => {}
            OpKind::SplitDyn { axis, parts } => {
                items.push(format!("axis={axis}"));
                items.push(format!("parts={parts}"));
            }
            OpKind::Gather { axis, indices } => {
                items.push(format!("axis={axis}"));
                if let Some(i) = indices {
                    items.push(format!("indices={i:?}"));
                }
            }
            OpKind::Slice {
                starts,
                ends,
                axes,
                steps,
            } => {
                items.push(format!("starts={starts:?}"));
                if !ends.is_empty() {
                    items.push(format!("ends={ends:?}"));
                }
                if !axes.is_empty() {
                    items.push(format!("axes={axes:?}"));
                }
                items.push(format!("steps={steps:?}"));
            }
            OpKind::Squeeze { axes } | OpKind::Unsqueeze { axes } => {
                items.push(format!("axes={axes:?}"))
            }
            OpKind::Split { axis, sizes } => {
                items.push(format!("axis={axis}"));
                items.push(format!("sizes={sizes:?}"));
            }
            OpKind::SeqEmpty(d) => items.push(format!("dtype={d}")),
            OpKind::SeqInput {
                name, dtype, dims, ..
            } => {
                items.push(format!("name={name}"));
                items.push(format!("elem={}", super::run_elem_text(*dtype, dims)));
            }
            OpKind::SeqInsert { at } | OpKind::SeqErase { at } | OpKind::SeqAt { at } => match at {
                super::Pos::Static(i) => items.push(format!("at={i}")),
                super::Pos::Run => items.push("at=run".to_string()),
                super::Pos::Default => {}
            },
            OpKind::SplitToSeq {
                axis,
                split,
                keepdims,
            } => {
                items.push(format!("axis={axis}"));
                match split {
                    super::SeqSplit::Ones => items.push(format!("keepdims={keepdims}")),
                    super::SeqSplit::Chunk(c) => items.push(format!("chunk={c}")),
                    super::SeqSplit::Sizes(s) => items.push(format!("sizes={s:?}")),
                    super::SeqSplit::Run => items.push("sizes=run".to_string()),
                }
            }
            OpKind::ConcatFromSeq { axis, new_axis } => {
                items.push(format!("axis={axis}"));
                if *new_axis {
                    items.push("new_axis".to_string());
                }
            }
            OpKind::View { offset, .. } => items.push(format!("offset={offset}")),
            OpKind::SeqConstruct
            | OpKind::SeqLen
            | OpKind::Binary(_)
            | OpKind::GlobalAvgPool
            | OpKind::Reshape(ReshapeTo::Flatten)
            | OpKind::MatMul
            | OpKind::Math(_)
            | OpKind::Copy => {}
        }
        if items.is_empty() {
            Ok(())
        } else {
            write!(f, " {{{}}}", items.join(" "))
        }
    }
}

/// `3x3`, `1,1,1,1`: sizes joined by `sep`.
fn join(v: &[usize], sep: &str) -> String {
    v.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join(sep)
}

fn act_text(a: &Act) -> String {
    match a {
        Act::None => "none".into(),
        Act::Relu => "relu".into(),
        Act::Clip { min, max } => format!("clip({min:?},{max:?})"),
        Act::LeakyRelu { alpha } => format!("leaky_relu({alpha:?})"),
        Act::Sigmoid => "sigmoid".into(),
        Act::Tanh => "tanh".into(),
    }
}
