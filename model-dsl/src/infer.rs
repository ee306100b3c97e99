//! Type and shape inference: gives every value of a front end's [`Graph`] a concrete [`Shape`]
//! and resolves the attributes that depend on sizes (`pad = same`), returning the *typed*
//! graph every later pass reads.
//!
//! Each op has one shape rule here, written once for every front end: a rule reports at the
//! [`Loc`]s the front end recorded (the op, an argument, the declaration it checks against),
//! and the front end renders them. Errors are collected: a value whose rule failed is
//! *poisoned* (`None`), and ops reading a poisoned value skip their own rules, so one mistake
//! is one error. Every message names the op and the shapes involved in the DSL's notation.
//!
//! Inference also keeps the byte budget ([`MAX_BYTES`]): the sum of every tensor's bytes
//! (inputs, parameters, results, scratch) stays far enough below `isize::MAX` that no size,
//! offset or total computed from the shapes later can overflow.

use crate::contract::conv_scratch;
use crate::diag::{plural, Errors, Loc};
use crate::ir::{
    BinOp, Graph, Kind, Op, OpKind, Padding, PoolKind, Producer, ReshapeTo, Shape, ValueId,
};

/// The most bytes a network's tensors may take all together: inputs, every op's result and
/// scratch, and the parameters, each rounded up to the planner's 64-byte alignment as if nothing
/// were reused. Keeping the sum (not just each tensor) under this bound, a quarter of what a Rust
/// allocation may hold, means no size, offset or total computed from the shapes later (plan,
/// parameter layout, generated constants, the kernels' own formulas) can overflow: they are all
/// at most a few times this sum.
pub const MAX_BYTES: usize = isize::MAX as usize / 4;

/// Types `g`. Returns the typed graph, or `None` after reporting every error to `errors`.
pub fn infer(g: &Graph, errors: &mut Errors) -> Option<Graph> {
    let mut cx = Infer {
        g,
        types: vec![None; g.values.len()],
        errors,
        bytes: 0,
    };
    let before = cx.errors.len();
    for input in &g.inputs {
        let Some(shape) = input.ty.known() else {
            cx.error(
                input.loc,
                format!(
                    "input `{}`: symbolic sizes are not supported yet",
                    input.name
                ),
            );
            continue;
        };
        if reserved_bytes(&shape).is_none_or(|b| b > MAX_BYTES) {
            cx.error(
                input.loc,
                format!("{shape} is too large: a tensor may take at most {MAX_BYTES} bytes"),
            );
            continue;
        }
        if cx
            .claim(
                input.loc,
                format_args!("input `{}` {shape}", input.name),
                &shape,
            )
            .is_some()
        {
            cx.types[input.value.index()] = Some(shape);
        }
    }
    for p in &g.params {
        let what = format_args!("parameter `{}` of shape {:?}", p.key, p.shape.dims);
        if cx.claim(p.ty_loc, what, &p.shape).is_some() {
            cx.types[p.value.index()] = Some(p.shape.clone());
        }
    }
    let mut resolved = Vec::with_capacity(g.ops.len());
    for op in &g.ops {
        let (kind, shapes) = match cx.op(op) {
            Some((kind, shapes)) => (kind, shapes.into_iter().map(Some).collect()),
            None => (op.kind.clone(), vec![None; op.results.len()]),
        };
        for (r, s) in op.results.iter().zip(shapes) {
            cx.types[r.index()] = s;
        }
        resolved.push(kind);
    }
    for o in &g.outputs {
        let (Some(actual), Some(declared)) = (cx.types[o.value.index()].clone(), o.ty.known())
        else {
            continue;
        };
        if actual != declared {
            cx.error(
                o.ty_loc,
                format!("output type is {declared} but the network computes {actual}"),
            );
        }
    }
    if cx.errors.len() > before {
        return None;
    }
    let mut typed = g.clone();
    typed.types = cx
        .types
        .into_iter()
        .map(|t| t.expect("no error, so every value is typed"))
        .collect();
    for (op, kind) in typed.ops.iter_mut().zip(resolved) {
        op.kind = kind;
    }
    Some(typed)
}

struct Infer<'a, 'e> {
    g: &'a Graph,
    types: Vec<Option<Shape>>,
    errors: &'e mut Errors,
    /// Bytes claimed so far against [`MAX_BYTES`].
    bytes: usize,
}

impl Infer<'_, '_> {
    fn error(&mut self, at: Loc, msg: impl std::fmt::Display) {
        self.errors.push(at, msg);
    }

    /// Counts a new tensor against [`MAX_BYTES`]; `what` names it in the error.
    fn claim(&mut self, at: Loc, what: impl std::fmt::Display, shape: &Shape) -> Option<()> {
        match reserved_bytes(shape)
            .and_then(|b| b.checked_add(self.bytes))
            .filter(|&t| t <= MAX_BYTES)
        {
            Some(total) => {
                self.bytes = total;
                Some(())
            }
            None => {
                self.error(at, format!("{what} is too large: a network's tensors may take at most {MAX_BYTES} bytes in all"));
                None
            }
        }
    }

    fn shape(&self, v: ValueId) -> Option<&Shape> {
        self.types[v.index()].as_ref()
    }

    /// The name a parameter value's layer goes by in messages: `c1` for `c1.weight`.
    fn layer(&self, v: ValueId) -> &str {
        match self.g.values[v.index()].producer {
            Producer::Param(p) => {
                let key = &self.g.params[p.index()].key;
                key.rsplit_once('.').map_or(key.as_str(), |(l, _)| l)
            }
            _ => "?",
        }
    }

    /// The op's rule: its resolved kind and result shapes, or `None` (reported, or an argument
    /// was poisoned).
    fn op(&mut self, op: &Op) -> Option<(OpKind, Vec<Shape>)> {
        let args: Vec<Shape> = op
            .args
            .iter()
            .map(|a| self.shape(*a).cloned())
            .collect::<Option<_>>()?;
        let name = op.kind.name();
        let x = &args[0];
        let decl = op.decl.unwrap_or(op.loc);
        let mut kind = op.kind.clone();
        let out = match &mut kind {
            OpKind::Conv2d {
                c_in,
                kernel,
                stride,
                dilation,
                pad,
                groups,
                ..
            } => {
                self.rank4(x, name, op.loc)?;
                if *c_in != x.channels() {
                    self.error(
                        decl,
                        format!(
                            "conv2d: input {x} has {} but weights `{}` expect {}",
                            plural(x.channels(), "channel"),
                            self.layer(op.args[1]),
                            c_in
                        ),
                    );
                    return None;
                }
                let (p, [oh, ow]) =
                    self.window(name, op.loc, x, *kernel, *stride, *dilation, *pad)?;
                *pad = Padding::Explicit(p);
                let c_out = args[1].dims[0];
                let Some(scratch) = conv_scratch(
                    *kernel,
                    *stride,
                    *dilation,
                    p,
                    *c_in / *groups,
                    c_out / *groups,
                    [oh, ow],
                ) else {
                    self.error(op.loc, format!("conv2d: the scratch buffer is too large: a network's tensors may take at most {MAX_BYTES} bytes in all"));
                    return None;
                };
                if scratch > 0 {
                    let s = Shape::tensor(crate::ir::DType::F32, vec![scratch]);
                    self.claim(
                        op.loc,
                        format_args!("conv2d: the scratch buffer of {scratch} floats"),
                        &s,
                    )?;
                }
                Shape::fm(x.batch(), c_out, oh, ow)
            }
            OpKind::Dense { .. } => {
                if x.rank() != 2 {
                    self.error(
                        op.loc,
                        format!("dense: input is {x}, expected a vector; use `flatten(...)` first"),
                    );
                    return None;
                }
                let w = &args[1];
                if w.dims[1] != x.channels() {
                    self.error(
                        decl,
                        format!(
                            "dense: input {x} has {} but weights `{}` expect {}",
                            plural(x.channels(), "feature"),
                            self.layer(op.args[1]),
                            w.dims[1]
                        ),
                    );
                    return None;
                }
                Shape::vec(x.batch(), w.dims[0])
            }
            OpKind::BatchNorm { .. } => {
                let c = args[1].dims[0];
                if c != x.channels() {
                    self.error(
                        decl,
                        format!(
                            "batch_norm: input {x} has {} but `{}` has {c}",
                            plural(x.channels(), "channel"),
                            self.layer(op.args[1]),
                        ),
                    );
                    return None;
                }
                x.clone()
            }
            OpKind::Unary(_) | OpKind::Softmax | OpKind::Copy => x.clone(),
            OpKind::Binary(bop) => {
                let y = &args[1];
                let Some(shape) = broadcast(x, y) else {
                    let name = match bop {
                        BinOp::Add => "add",
                        BinOp::Sub => "sub",
                        BinOp::Mul => "mul",
                        BinOp::Div => "div",
                    };
                    self.error(
                        op.loc,
                        format!(
                            "{name}: cannot broadcast {x} with {y}: each size must match or be 1"
                        ),
                    );
                    return None;
                };
                shape
            }
            OpKind::Pool {
                kind: pk,
                kernel,
                stride,
                pad,
                ..
            } => {
                let name = match pk {
                    PoolKind::Max => "max_pool",
                    PoolKind::Avg => "avg_pool",
                };
                self.rank4(x, name, op.loc)?;
                let (p, [oh, ow]) = self.window(name, op.loc, x, *kernel, *stride, [1, 1], *pad)?;
                *pad = Padding::Explicit(p);
                Shape::fm(x.batch(), x.channels(), oh, ow)
            }
            OpKind::GlobalAvgPool => {
                self.rank4(x, name, op.loc)?;
                Shape::fm(x.batch(), x.channels(), 1, 1)
            }
            OpKind::Concat => {
                let first = x.clone();
                let mut channels = Some(0usize);
                for (i, s) in args.iter().enumerate() {
                    if s.rank() != first.rank()
                        || s.kind != first.kind
                        || s.batch() != first.batch()
                        || s.spatial_dims() != first.spatial_dims()
                    {
                        self.error(op.arg_loc(i), format!("concat: input {} is {s} but input 1 is {first}; only the channel count may differ", i + 1));
                        return None;
                    }
                    channels = channels.and_then(|c| c.checked_add(s.channels()));
                }
                let Some(channels) = channels else {
                    self.error(op.loc, format!("concat: the output is too large: its channel count overflows (at most {MAX_BYTES} bytes)"));
                    return None;
                };
                let mut out = first;
                out.dims[1] = channels;
                out
            }
            OpKind::Reshape(ReshapeTo::Flatten) => {
                // A view of the input's bytes: nothing new to count against `MAX_BYTES`.
                return Some((kind, vec![Shape::vec(x.batch(), x.elements() / x.batch())]));
            }
            OpKind::Reshape(ReshapeTo::Type { ty, batch_given }) => {
                let mut ty = ty.clone();
                if !*batch_given {
                    ty.dims[0] = crate::ir::Dim::Known(x.batch());
                }
                let Some(out) = ty.known() else {
                    self.error(decl, "reshape: symbolic sizes are not supported yet");
                    return None;
                };
                if reserved_bytes(&out).is_none_or(|b| b > MAX_BYTES) {
                    self.error(
                        decl,
                        format!("{out} is too large: a tensor may take at most {MAX_BYTES} bytes"),
                    );
                    return None;
                }
                if out.elements() != x.elements() {
                    self.error(
                        decl,
                        format!(
                            "reshape: {x} has {} elements but {out} has {}",
                            x.elements(),
                            out.elements()
                        ),
                    );
                    return None;
                }
                return Some((kind, vec![out]));
            }
            OpKind::Pad { pad, .. } => {
                self.rank4(x, name, op.loc)?;
                let [h, w] = x.spatial();
                let grow = |size: usize, a: usize, b: usize| size.checked_add(a)?.checked_add(b);
                let (Some(oh), Some(ow)) = (grow(h, pad[0], pad[2]), grow(w, pad[1], pad[3]))
                else {
                    self.error(
                        op.loc,
                        format!("pad: the output is too large: padding {x} by {pad:?} overflows"),
                    );
                    return None;
                };
                Shape::fm(x.batch(), x.channels(), oh, ow)
            }
        };
        self.claim(op.loc, format_args!("{name}: the output {out}"), &out)?;
        Some((kind, vec![out]))
    }

    fn rank4(&mut self, x: &Shape, op: &str, at: Loc) -> Option<()> {
        if x.rank() != 4 {
            self.error(
                at,
                format!("{op}: input is {x}, expected a feature map `fm<...>`"),
            );
            return None;
        }
        Some(())
    }

    /// Resolves padding and computes the output size of a sliding window, with an error when a
    /// size would shrink to zero or below.
    #[allow(clippy::too_many_arguments)]
    fn window(
        &mut self,
        op: &str,
        at: Loc,
        s: &Shape,
        k: [usize; 2],
        stride: [usize; 2],
        dil: [usize; 2],
        pad: Padding,
    ) -> Option<([usize; 4], [usize; 2])> {
        if stride.contains(&0) || dil.contains(&0) || k.contains(&0) {
            self.error(
                at,
                format!("{op}: kernel, stride and dilation must be at least 1"),
            );
            return None;
        }
        match pad {
            // As ONNX requires: a pooling window that can lie entirely in padding sees no input.
            Padding::Explicit(p)
                if op.ends_with("pool") && (p[0].max(p[2]) >= k[0] || p[1].max(p[3]) >= k[1]) =>
            {
                self.error(
                    at,
                    format!("{op}: padding {p:?} must be smaller than the window {k:?}"),
                );
                return None;
            }
            _ => {}
        }
        let [h, w] = s.spatial();
        // What one window spans, dilation included; `None` if that overflows.
        let extent = [0, 1].map(|d| (k[d] - 1).checked_mul(dil[d])?.checked_add(1));
        let too_large = format!("{op}: the window is too large: kernel {k:?} with dilation {dil:?} spans more than usize::MAX");
        let pad = match pad {
            Padding::Explicit(p) => p,
            Padding::Same => {
                // ONNX SAME_UPPER: the output is ceil(in / stride); extra padding goes at the end.
                // `(out - 1) * stride < in`, so only adding the window's extent can overflow.
                let total = |i: usize, d: usize| {
                    let out = i.div_ceil(stride[d]);
                    Some(
                        ((out - 1) * stride[d])
                            .checked_add(extent[d]?)?
                            .saturating_sub(i),
                    )
                };
                let (Some(th), Some(tw)) = (total(h, 0), total(w, 1)) else {
                    self.error(at, too_large);
                    return None;
                };
                [th / 2, tw / 2, th - th / 2, tw - tw / 2]
            }
        };
        let mut out = [0; 2];
        for (d, (size, name)) in [(h, "height"), (w, "width")].into_iter().enumerate() {
            let Some(extent) = extent[d] else {
                self.error(at, too_large);
                return None;
            };
            let Some(padded) = size
                .checked_add(pad[d])
                .and_then(|p| p.checked_add(pad[d + 2]))
            else {
                self.error(
                    at,
                    format!(
                        "{op}: the padded {name} is too large: {size} + {} + {} overflows",
                        pad[d],
                        pad[d + 2]
                    ),
                );
                return None;
            };
            if padded < extent {
                self.error(at, format!("{op}: the {name} shrinks to zero: input {s} has {name} {size} (padded {padded}) but the window spans {extent}"));
                return None;
            }
            out[d] = (padded - extent) / stride[d] + 1;
        }
        Some((pad, out))
    }
}

/// Numpy broadcasting: sizes aligned from the right, each pair equal or one of them 1. A
/// feature map and a vector do not broadcast with each other (their channels would not line
/// up); the result is spelt like the operand of higher rank.
pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
    if a.dtype != b.dtype || (a.kind != b.kind && a.kind != Kind::Tensor && b.kind != Kind::Tensor)
    {
        return None;
    }
    let rank = a.rank().max(b.rank());
    let at = |s: &Shape, i: usize| {
        let off = rank - s.rank();
        if i < off {
            1
        } else {
            s.dims[i - off]
        }
    };
    let dims = (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let kind = if a.rank() >= b.rank() { a.kind } else { b.kind };
    Some(Shape::new(a.dtype, dims, kind))
}

/// Bytes the planner reserves for a tensor: its data rounded up to the 64-byte alignment (at
/// least 64). `None` if that does not fit in `usize`.
fn reserved_bytes(shape: &Shape) -> Option<usize> {
    let elements = shape
        .dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))?;
    Some(
        elements
            .checked_mul(shape.dtype.size())?
            .checked_next_multiple_of(64)?
            .max(64),
    )
}
