//! Lowering: the AST becomes a [`Graph`], with names resolved, op arguments read and checked,
//! and every value's shape inferred on the way (an op's shape rules need its resolved
//! arguments, e.g. `pad = same`, so the two happen in one walk).
//!
//! Errors are collected, not returned at the first one. A value whose op failed is *poisoned*
//! (`None`): later ops that read it skip their own checks, so one mistake gives one error.

use std::collections::HashMap;

use proc_macro2::Span;
use syn::Ident;

use crate::ir::{
    Act, BinOp, BnParams, Graph, OpKind, Param, ParamId, PoolKind, Producer, Shape, ValueId,
};
use crate::syntax::{
    Arg, Body, Dtype, Expr, NetworkDef, Num, ParamName, ParamType, Stmt, TypeExpr, TypeKind, Value,
};
use crate::Errors;

/// The most bytes a network's tensors may take all together: inputs, every op's result and
/// scratch, and the parameters, each rounded up to the planner's 64-byte alignment as if nothing
/// were reused. Keeping the sum (not just each tensor) under this bound, a quarter of what a Rust
/// allocation may hold, means no size, offset or total computed from the shapes later (plan,
/// parameter layout, generated constants, the kernels' own formulas) can overflow: they are all
/// at most a few times this sum.
pub const MAX_BYTES: usize = isize::MAX as usize / 4;

/// The operations the DSL knows, for "unknown operation" messages.
pub const OPS: &[&str] = &[
    "conv2d",
    "dense",
    "batch_norm",
    "relu",
    "relu6",
    "clip",
    "leaky_relu",
    "sigmoid",
    "tanh",
    "add",
    "sub",
    "mul",
    "div",
    "max_pool",
    "avg_pool",
    "global_avg_pool",
    "concat",
    "flatten",
    "reshape",
    "softmax",
    "pad",
];

#[derive(Debug)]
pub struct Lowered {
    pub graph: Graph,
    /// The `weights "file";` declaration, if any.
    pub weights_file: Option<syn::LitStr>,
}

pub fn lower(def: &NetworkDef, errors: &mut Errors) -> Lowered {
    let mut cx = Lower {
        graph: Graph::default(),
        scope: HashMap::new(),
        errors,
        param_keys: HashMap::new(),
        bytes: 0,
    };
    for (i, input) in def.inputs.iter().enumerate() {
        let Some(shape) = cx.type_shape(&input.ty, None) else {
            // Bound but poisoned: uses of it are not reported again as undefined.
            cx.scope.insert(input.name.to_string(), None);
            continue;
        };
        if cx
            .claim(
                input.ty.span,
                format_args!("input `{}` {shape}", input.name),
                &shape.dims,
            )
            .is_none()
        {
            continue;
        }
        let v = cx
            .graph
            .add_value(Producer::Input(i), shape, input.name.span());
        cx.graph.values[v.index()].name = Some(input.name.to_string());
        cx.graph.inputs.push(crate::ir::Input {
            name: input.name.to_string(),
            value: v,
            span: input.name.span(),
        });
        if input.name == "arena" {
            // `run_in` takes the caller's arena under that name.
            cx.error(
                input.name.span(),
                "`arena` is reserved for the arena parameter of `run_in`; rename this input",
            );
        }
        if cx.scope.insert(input.name.to_string(), Some(v)).is_some() {
            cx.error(
                input.name.span(),
                format!("input `{}` is declared twice", input.name),
            );
        }
    }
    let weights_file = cx.body(&def.body, def);
    Lowered {
        graph: cx.graph,
        weights_file,
    }
}

struct Lower<'e> {
    graph: Graph,
    /// Visible names; `None` marks a poisoned binding (its op had an error).
    scope: HashMap<String, Option<ValueId>>,
    errors: &'e mut Errors,
    param_keys: HashMap<String, Span>,
    /// Bytes claimed so far against [`MAX_BYTES`].
    bytes: usize,
}

impl Lower<'_> {
    fn error(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.errors.push(syn::Error::new(span, msg));
    }

    /// Counts a new tensor of shape `dims` against [`MAX_BYTES`]; `what` names it in the error.
    fn claim(&mut self, span: Span, what: impl std::fmt::Display, dims: &[usize]) -> Option<()> {
        match reserved_bytes(dims)
            .and_then(|b| b.checked_add(self.bytes))
            .filter(|&t| t <= MAX_BYTES)
        {
            Some(total) => {
                self.bytes = total;
                Some(())
            }
            None => {
                self.error(span, format!("{what} is too large: a network's tensors may take at most {MAX_BYTES} bytes in all"));
                None
            }
        }
    }

    /// Adds an op whose result has `shape`, once the shape's bytes fit in [`MAX_BYTES`].
    fn add_op(
        &mut self,
        name: &str,
        kind: OpKind,
        args: Vec<ValueId>,
        shape: Shape,
        span: Span,
    ) -> Option<ValueId> {
        self.claim(
            span,
            format_args!("{name}: the output {shape}"),
            &shape.dims,
        )?;
        Some(self.graph.add_op(kind, args, shape, span))
    }

    fn body(&mut self, body: &Body, def: &NetworkDef) -> Option<syn::LitStr> {
        let mut weights_file: Option<syn::LitStr> = None;
        for stmt in &body.stmts {
            match stmt {
                Stmt::Weights(lit) => {
                    if weights_file.is_some() {
                        self.error(
                            lit.span(),
                            "only one `weights \"file\";` declaration is allowed",
                        );
                    }
                    weights_file = Some(lit.clone());
                }
                Stmt::Let { name, value } => {
                    let v = self.expr(value);
                    if let Some(v) = v {
                        let slot = &mut self.graph.values[v.index()].name;
                        if slot.is_none() {
                            *slot = Some(name.to_string());
                        }
                    }
                    self.scope.insert(name.to_string(), v);
                }
            }
        }
        let results: Vec<&Expr> = match &body.result {
            Expr::Tuple(items, _) => items.iter().collect(),
            one => vec![one],
        };
        let result_span = body.result.span();
        if results.len() != def.outputs.len() {
            self.error(
                result_span,
                format!(
                    "the network declares {} but its result has {}",
                    plural(def.outputs.len(), "output"),
                    plural(results.len(), "value")
                ),
            );
            return weights_file;
        }
        for (expr, ty) in results.into_iter().zip(&def.outputs) {
            let v = self.expr(expr);
            let declared = self.type_shape(ty, None);
            let (Some(v), Some(declared)) = (v, declared) else {
                continue;
            };
            let actual = self.graph.shape(v).clone();
            if actual != declared {
                self.errors.push(ty.error(format!(
                    "output type is {declared} but the network computes {actual}"
                )));
                continue;
            }
            // An output must live in the arena, which the caller borrows it from; an output that
            // is an input's own bytes (or a view of them) gets copied there.
            let v = if self.is_external_root(v) {
                let Some(copy) = self.add_op("copy", OpKind::Copy, vec![v], actual, expr.span())
                else {
                    continue;
                };
                copy
            } else {
                v
            };
            self.graph.outputs.push(crate::ir::Output {
                value: v,
                ty_span: ty.span,
            });
        }
        weights_file
    }

    fn is_external_root(&self, mut v: ValueId) -> bool {
        loop {
            match self.graph.values[v.index()].producer {
                Producer::Input(_) => return true,
                Producer::Op(op) => {
                    let op = self.graph.op(op);
                    if op.kind == OpKind::Reshape {
                        v = op.args[0];
                    } else {
                        return false;
                    }
                }
            }
        }
    }

    /// Resolves a DSL type to a shape. `batch` is the batch to use when the type gives none
    /// (for `reshape`, the input's batch); model inputs and outputs default to 1.
    fn type_shape(&mut self, ty: &TypeExpr, batch: Option<usize>) -> Option<Shape> {
        self.check_dtype(&ty.dtype)?;
        let n = ty.batch.map(|b| b.value).or(batch).unwrap_or(1);
        let mut nums = vec![ty.channels];
        nums.extend(ty.batch);
        let shape = match (ty.kind, &ty.spatial) {
            (TypeKind::Fm, Some(sp)) if sp.len() == 2 => {
                nums.extend(sp.iter().copied());
                Shape::fm(n, ty.channels.value, sp[0].value, sp[1].value)
            }
            (TypeKind::Fm, _) => {
                self.error(
                    ty.span,
                    "a feature map needs two spatial sizes, like `fm<3xf32[224,224]>`",
                );
                return None;
            }
            (TypeKind::Vec, None) => Shape::vec(n, ty.channels.value),
            (TypeKind::Vec, Some(_)) => {
                self.error(
                    ty.span,
                    "a vector has no spatial sizes: write `vec<10xf32>` or use `fm<...>`",
                );
                return None;
            }
        };
        if let Some(zero) = nums.iter().find(|n| n.value == 0) {
            self.error(zero.span, "sizes must be at least 1");
            return None;
        }
        if reserved_bytes(&shape.dims).is_none_or(|b| b > MAX_BYTES) {
            self.error(
                ty.span,
                format!("{shape} is too large: a tensor may take at most {MAX_BYTES} bytes"),
            );
            return None;
        }
        Some(shape)
    }

    fn check_dtype(&mut self, dtype: &Dtype) -> Option<()> {
        match dtype.name.as_str() {
            "f32" => Some(()),
            "f16" | "bf16" | "f64" | "i8" | "u8" | "i16" | "i32" | "i64" => {
                self.error(
                    dtype.span,
                    format!(
                        "dtype `{}` is not supported yet: kiln computes in f32",
                        dtype.name
                    ),
                );
                None
            }
            other => {
                self.error(
                    dtype.span,
                    format!("unknown dtype `{other}`: expected `f32`"),
                );
                None
            }
        }
    }

    fn expr(&mut self, expr: &Expr) -> Option<ValueId> {
        match expr {
            Expr::Name(name) => match self.scope.get(&name.to_string()) {
                Some(v) => *v,
                None => {
                    let mut msg = format!("cannot find value `{name}` in this network");
                    if OPS.contains(&name.to_string().as_str()) {
                        msg += &format!("; to call the operation, write `{name}(...)`");
                    }
                    self.error(name.span(), msg);
                    None
                }
            },
            Expr::Tuple(_, span) => {
                self.error(
                    *span,
                    "a tuple is only allowed as the network's final result",
                );
                None
            }
            Expr::Call { op, args } => self.call(op, args),
        }
    }

    fn call(&mut self, op: &Ident, args: &[Arg]) -> Option<ValueId> {
        let name = op.to_string();
        let span = op.span();
        if !OPS.contains(&name.as_str()) {
            let hint = closest(&name, OPS)
                .map(|c| format!("; did you mean `{c}`?"))
                .unwrap_or_default();
            self.error(span, format!("unknown operation `{name}`{hint}"));
            // Still lower the arguments so their own mistakes are reported.
            for arg in args {
                if let Arg::Positional(Value::Expr(e))
                | Arg::Named {
                    value: Value::Expr(e),
                    ..
                } = arg
                {
                    self.expr(e);
                }
            }
            return None;
        }
        let mut a = Args::new(op, args);
        let result = self.op(&name, span, &mut a);
        // An op that failed stopped reading its arguments; only misspelt names are worth
        // reporting then. An op with a misspelt argument fails too: it ran without it.
        let clean = a.finish(self, result.is_some());
        result.filter(|_| clean)
    }

    /// Lowers one known op. Returns `None` if it (or one of its inputs) had an error.
    fn op(&mut self, name: &str, span: Span, a: &mut Args) -> Option<ValueId> {
        match name {
            "conv2d" => self.conv2d(span, a),
            "dense" => self.dense(span, a),
            "batch_norm" => {
                let x = self.inputs::<1>(a, span)?[0];
                let (pname, pty) = a.param(self, "statistics, like `bn1: norm<16xf32>`")?;
                let eps_span = a.named_span("eps").unwrap_or(span);
                let eps = a.float(self, "eps", 1e-5);
                if eps.is_some_and(|e| e.is_nan() || e <= 0.0) {
                    self.error(eps_span, "batch_norm: `eps` must be positive");
                    return None;
                }
                let shape = self.graph.shape(x).clone();
                let ParamType::Norm {
                    channels, dtype, ..
                } = pty
                else {
                    self.error(
                        pty.span(),
                        "batch_norm takes statistics typed `norm<Cxf32>`",
                    );
                    return None;
                };
                self.check_dtype(dtype)?;
                if channels.value != shape.channels() {
                    self.error(
                        channels.span,
                        format!(
                            "batch_norm: input {shape} has {} but `{}` has {}",
                            plural(shape.channels(), "channel"),
                            pname.key,
                            channels.value
                        ),
                    );
                    return None;
                }
                let stats = self.norm_params(pname, pty, channels.value)?;
                self.add_op(
                    name,
                    OpKind::BatchNorm {
                        bn: BnParams {
                            stats,
                            eps: eps? as f32,
                        },
                        act: Act::None,
                    },
                    vec![x],
                    shape,
                    span,
                )
            }
            "relu" | "relu6" | "sigmoid" | "tanh" | "clip" | "leaky_relu" => {
                let x = self.inputs::<1>(a, span)?[0];
                let act = match name {
                    "relu" => Act::Relu,
                    "relu6" => Act::Clip { min: 0.0, max: 6.0 },
                    "sigmoid" => Act::Sigmoid,
                    "tanh" => Act::Tanh,
                    "leaky_relu" => Act::LeakyRelu {
                        alpha: a.float(self, "alpha", 0.01)? as f32,
                    },
                    _ => {
                        let min_span = a.named_span("min").unwrap_or(span);
                        let min = a.float(self, "min", f64::NEG_INFINITY)? as f32;
                        let max = a.float(self, "max", f64::INFINITY)? as f32;
                        if min > max {
                            self.error(
                                min_span,
                                format!("clip: min ({min}) is greater than max ({max})"),
                            );
                            return None;
                        }
                        Act::Clip { min, max }
                    }
                };
                let shape = self.graph.shape(x).clone();
                self.add_op(name, OpKind::Unary(act), vec![x], shape, span)
            }
            "add" | "sub" | "mul" | "div" => {
                let [x, y] = self.inputs::<2>(a, span)?;
                let op = match name {
                    "add" => BinOp::Add,
                    "sub" => BinOp::Sub,
                    "mul" => BinOp::Mul,
                    _ => BinOp::Div,
                };
                let (sx, sy) = (self.graph.shape(x).clone(), self.graph.shape(y).clone());
                let Some(shape) = broadcast(&sx, &sy) else {
                    self.error(
                        span,
                        format!(
                            "{name}: cannot broadcast {sx} with {sy}: each size must match or be 1"
                        ),
                    );
                    return None;
                };
                self.add_op(name, OpKind::Binary(op), vec![x, y], shape, span)
            }
            "max_pool" | "avg_pool" => {
                let x = self.inputs::<1>(a, span)?[0];
                let shape = self.fm_input(x, name, span)?;
                let kernel = a.positional_pair(self, "a window size like `2x2`")?;
                let stride = a.pair(self, "stride")?.unwrap_or(kernel);
                let kind = if name == "max_pool" {
                    PoolKind::Max
                } else {
                    PoolKind::Avg
                };
                let count_include_pad = if kind == PoolKind::Avg {
                    a.bool(self, "count_include_pad", false)?
                } else {
                    false
                };
                let pad = a.padding(self)?;
                let (pad, [oh, ow]) =
                    self.window(name, span, &shape, kernel, stride, [1, 1], pad)?;
                let out = Shape::fm(shape.batch(), shape.channels(), oh, ow);
                self.add_op(
                    name,
                    OpKind::Pool {
                        kind,
                        kernel,
                        stride,
                        pad,
                        count_include_pad,
                    },
                    vec![x],
                    out,
                    span,
                )
            }
            "global_avg_pool" => {
                let x = self.inputs::<1>(a, span)?[0];
                let shape = self.fm_input(x, name, span)?;
                let out = Shape::fm(shape.batch(), shape.channels(), 1, 1);
                self.add_op(name, OpKind::GlobalAvgPool, vec![x], out, span)
            }
            "concat" => {
                let xs = self.variadic_inputs(a, span)?;
                if xs.len() < 2 {
                    self.error(span, "concat: needs at least two inputs");
                    return None;
                }
                let first = self.graph.shape(xs[0]).clone();
                let mut channels = Some(0usize);
                for (i, &x) in xs.iter().enumerate() {
                    let s = self.graph.shape(x).clone();
                    if s.kind != first.kind
                        || s.batch() != first.batch()
                        || s.spatial() != first.spatial()
                    {
                        self.error(a.positional_span(i).unwrap_or(span), format!("concat: input {} is {s} but input 1 is {first}; only the channel count may differ", i + 1));
                        return None;
                    }
                    channels = channels.and_then(|c| c.checked_add(s.channels()));
                }
                let Some(channels) = channels else {
                    self.error(span, format!("concat: the output is too large: its channel count overflows (at most {MAX_BYTES} bytes)"));
                    return None;
                };
                let mut out = first;
                out.dims[1] = channels;
                self.add_op(name, OpKind::Concat, xs, out, span)
            }
            "flatten" => {
                let x = self.inputs::<1>(a, span)?[0];
                let s = self.graph.shape(x).clone();
                let out = Shape::vec(s.batch(), s.elements() / s.batch());
                // A view of the input's bytes: nothing new to count against `MAX_BYTES`.
                Some(self.graph.add_op(OpKind::Reshape, vec![x], out, span))
            }
            "reshape" => {
                let x = self.inputs::<1>(a, span)?[0];
                let Some(ty) = a.positional_type(self) else {
                    self.error(
                        span,
                        "reshape: expected the target type, like `reshape(h, fm<16xf32[4,4]>)`",
                    );
                    return None;
                };
                let s = self.graph.shape(x).clone();
                let out = self.type_shape(&ty, Some(s.batch()))?;
                if out.elements() != s.elements() {
                    self.errors.push(ty.error(format!(
                        "reshape: {s} has {} elements but {out} has {}",
                        s.elements(),
                        out.elements()
                    )));
                    return None;
                }
                Some(self.graph.add_op(OpKind::Reshape, vec![x], out, span))
            }
            "softmax" => {
                let x = self.inputs::<1>(a, span)?[0];
                let s = self.graph.shape(x).clone();
                self.add_op(name, OpKind::Softmax, vec![x], s, span)
            }
            "pad" => {
                let x = self.inputs::<1>(a, span)?[0];
                let s = self.fm_input(x, name, span)?;
                let pad = match a.take_positional() {
                    Some(v) => pads_of(self, &v)?,
                    None => {
                        self.error(span, "pad: expected the padding, like `pad(h, 1)` or `pad(h, (top, left, bottom, right))`");
                        return None;
                    }
                };
                let value = a.float(self, "value", 0.0)? as f32;
                let [h, w] = s.spatial();
                let grow = |size: usize, a: usize, b: usize| size.checked_add(a)?.checked_add(b);
                let (Some(oh), Some(ow)) = (grow(h, pad[0], pad[2]), grow(w, pad[1], pad[3]))
                else {
                    self.error(
                        span,
                        format!("pad: the output is too large: padding {s} by {pad:?} overflows"),
                    );
                    return None;
                };
                let out = Shape::fm(s.batch(), s.channels(), oh, ow);
                self.add_op(name, OpKind::Pad { pad, value }, vec![x], out, span)
            }
            _ => unreachable!("`{name}` is in OPS but has no lowering"),
        }
    }

    fn conv2d(&mut self, span: Span, a: &mut Args) -> Option<ValueId> {
        let x = self.inputs::<1>(a, span)?[0];
        let (pname, pty) = a.param(self, "weights, like `w1: weights<3 -> 3x3xf32 -> 16>`")?;
        let stride = a.pair(self, "stride")?.unwrap_or([1, 1]);
        let dilation = a.pair(self, "dilation")?.unwrap_or([1, 1]);
        let groups_span = a.named_span("groups").unwrap_or(span);
        let groups = a.usize(self, "groups")?.unwrap_or(1);
        let has_bias = a.bool(self, "bias", true)?;
        let pad = a.padding(self)?;
        let shape = self.fm_input(x, "conv2d", span)?;
        let ParamType::Weights {
            c_in,
            kernel: Some((kernel, dtype)),
            c_out,
            ..
        } = pty
        else {
            self.error(
                pty.span(),
                "conv2d weights need a kernel size: `weights<Cin -> KhxKwxf32 -> Cout>`",
            );
            return None;
        };
        self.check_dtype(dtype)?;
        let [kh, kw] = match kernel.as_slice() {
            [k] => [k.value, k.value],
            [h, w] => [h.value, w.value],
            _ => {
                self.error(dtype.span, "conv2d: expected a 2-D kernel like `3x3xf32`");
                return None;
            }
        };
        if kh == 0 || kw == 0 || c_in.value == 0 || c_out.value == 0 {
            self.error(pty.span(), "conv2d: sizes must be at least 1");
            return None;
        }
        if c_in.value != shape.channels() {
            self.error(
                c_in.span,
                format!(
                    "conv2d: input {shape} has {} but weights `{}` expect {}",
                    plural(shape.channels(), "channel"),
                    pname.key,
                    c_in.value
                ),
            );
            return None;
        }
        if groups == 0 || c_in.value % groups != 0 || c_out.value % groups != 0 {
            self.error(groups_span, format!("conv2d: groups = {groups} must divide both the input channels ({}) and the output channels ({})", c_in.value, c_out.value));
            return None;
        }
        let (pad, [oh, ow]) =
            self.window("conv2d", span, &shape, [kh, kw], stride, dilation, pad)?;
        let weight = self.param(
            pname,
            pty,
            "weight",
            vec![c_out.value, c_in.value / groups, kh, kw],
        )?;
        let bias = if has_bias {
            Some(self.param(pname, pty, "bias", vec![c_out.value])?)
        } else {
            None
        };
        // The im2col or band buffer the kernel will need is planned into the arena too.
        let Some(scratch) = crate::layout::conv_scratch(
            [kh, kw],
            stride,
            dilation,
            pad,
            c_in.value / groups,
            c_out.value / groups,
            [oh, ow],
        ) else {
            self.error(span, format!("conv2d: the scratch buffer is too large: a network's tensors may take at most {MAX_BYTES} bytes in all"));
            return None;
        };
        if scratch > 0 {
            self.claim(
                span,
                format_args!("conv2d: the scratch buffer of {scratch} floats"),
                &[scratch],
            )?;
        }
        let out = Shape::fm(shape.batch(), c_out.value, oh, ow);
        let kind = OpKind::Conv2d {
            weight,
            bias,
            kernel: [kh, kw],
            stride,
            dilation,
            pad,
            groups,
            bn: None,
            act: Act::None,
        };
        self.add_op("conv2d", kind, vec![x], out, span)
    }

    fn dense(&mut self, span: Span, a: &mut Args) -> Option<ValueId> {
        let x = self.inputs::<1>(a, span)?[0];
        let (pname, pty) = a.param(self, "weights, like `fc: weights<256 -> 10>`")?;
        let has_bias = a.bool(self, "bias", true)?;
        let shape = self.graph.shape(x).clone();
        let ParamType::Weights {
            c_in,
            kernel,
            c_out,
            ..
        } = pty
        else {
            self.error(pty.span(), "dense takes weights typed `weights<In -> Out>`");
            return None;
        };
        if let Some((_, dtype)) = kernel {
            self.error(
                dtype.span,
                "dense weights have no kernel size: write `weights<In -> Out>`",
            );
            return None;
        }
        if shape.kind != TypeKind::Vec {
            self.error(
                span,
                format!("dense: input is {shape}, expected a vector; use `flatten(...)` first"),
            );
            return None;
        }
        if c_in.value != shape.channels() {
            self.error(
                c_in.span,
                format!(
                    "dense: input {shape} has {} but weights `{}` expect {}",
                    plural(shape.channels(), "feature"),
                    pname.key,
                    c_in.value
                ),
            );
            return None;
        }
        if c_out.value == 0 {
            self.error(c_out.span, "dense: sizes must be at least 1");
            return None;
        }
        let weight = self.param(pname, pty, "weight", vec![c_out.value, c_in.value])?;
        let bias = if has_bias {
            Some(self.param(pname, pty, "bias", vec![c_out.value])?)
        } else {
            None
        };
        let out = Shape::vec(shape.batch(), c_out.value);
        self.add_op(
            "dense",
            OpKind::Dense {
                weight,
                bias,
                bn: None,
                act: Act::None,
            },
            vec![x],
            out,
            span,
        )
    }

    fn norm_params(
        &mut self,
        pname: &ParamName,
        pty: &ParamType,
        c: usize,
    ) -> Option<[ParamId; 4]> {
        let mut ids = Vec::new();
        for part in ["weight", "bias", "running_mean", "running_var"] {
            ids.push(self.param(pname, pty, part, vec![c])?);
        }
        ids.try_into().ok()
    }

    /// Declares the tensor `<name>.<part>`; a name used twice is an error.
    fn param(
        &mut self,
        name: &ParamName,
        ty: &ParamType,
        part: &str,
        shape: Vec<usize>,
    ) -> Option<ParamId> {
        let key = format!("{}.{part}", name.key);
        if self.param_keys.insert(key.clone(), name.span).is_some() {
            self.error(
                name.span,
                format!(
                    "parameter `{}` is declared twice; each layer needs its own name",
                    name.key
                ),
            );
            return None;
        }
        self.claim(
            ty.span(),
            format_args!("parameter `{key}` of shape {shape:?}"),
            &shape,
        )?;
        let id = ParamId(self.graph.params.len() as u32);
        self.graph.params.push(Param {
            key,
            shape,
            name_span: name.span,
            ty_span: ty.span(),
            ty_end: ty.end(),
        });
        Some(id)
    }

    fn fm_input(&mut self, x: ValueId, op: &str, span: Span) -> Option<Shape> {
        let s = self.graph.shape(x).clone();
        if s.kind != TypeKind::Fm {
            self.error(
                span,
                format!("{op}: input is {s}, expected a feature map `fm<...>`"),
            );
            return None;
        }
        Some(s)
    }

    /// Resolves padding and computes the output size of a sliding window, with an error when a
    /// size would shrink to zero or below.
    #[allow(clippy::too_many_arguments)]
    fn window(
        &mut self,
        op: &str,
        span: Span,
        s: &Shape,
        k: [usize; 2],
        stride: [usize; 2],
        dil: [usize; 2],
        pad: Padding,
    ) -> Option<([usize; 4], [usize; 2])> {
        if stride.contains(&0) || dil.contains(&0) || k.contains(&0) {
            self.error(
                span,
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
                    span,
                    format!("{op}: padding {p:?} must be smaller than the window {k:?}"),
                );
                return None;
            }
            _ => {}
        }
        let [h, w] = s.spatial();
        // What one window spans, dilation included; `None` if that overflows.
        let extent = [0, 1].map(|d| (k[d] - 1).checked_mul(dil[d])?.checked_add(1));
        let pad = match pad {
            Padding::Explicit(p) => p,
            Padding::Valid => [0; 4],
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
                    self.error(span, format!("{op}: the window is too large: kernel {k:?} with dilation {dil:?} spans more than usize::MAX"));
                    return None;
                };
                [th / 2, tw / 2, th - th / 2, tw - tw / 2]
            }
        };
        let mut out = [0; 2];
        for (d, (size, name)) in [(h, "height"), (w, "width")].into_iter().enumerate() {
            let Some(extent) = extent[d] else {
                self.error(span, format!("{op}: the window is too large: kernel {k:?} with dilation {dil:?} spans more than usize::MAX"));
                return None;
            };
            let Some(padded) = size
                .checked_add(pad[d])
                .and_then(|p| p.checked_add(pad[d + 2]))
            else {
                self.error(
                    span,
                    format!(
                        "{op}: the padded {name} is too large: {size} + {} + {} overflows",
                        pad[d],
                        pad[d + 2]
                    ),
                );
                return None;
            };
            if padded < extent {
                self.error(span, format!("{op}: the {name} shrinks to zero: input {s} has {name} {size} (padded {padded}) but the window spans {extent}"));
                return None;
            }
            out[d] = (padded - extent) / stride[d] + 1;
        }
        Some((pad, out))
    }

    fn inputs<const N: usize>(&mut self, a: &mut Args, span: Span) -> Option<[ValueId; N]> {
        let mut out = Vec::new();
        let mut poisoned = false;
        for i in 0..N {
            match a.take_positional() {
                Some(Value::Expr(e)) => match self.expr(&e) {
                    Some(v) => out.push(v),
                    None => poisoned = true,
                },
                Some(other) => {
                    self.error(
                        other.span(),
                        format!("{}: argument {} must be a tensor", a.op, i + 1),
                    );
                    poisoned = true;
                }
                None => {
                    self.error(span, format!("{}: missing input {} of {N}", a.op, i + 1));
                    return None;
                }
            }
        }
        if poisoned {
            return None;
        }
        out.try_into().ok()
    }

    fn variadic_inputs(&mut self, a: &mut Args, _span: Span) -> Option<Vec<ValueId>> {
        let mut out = Vec::new();
        let mut poisoned = false;
        while let Some(v) = a.take_positional() {
            match v {
                Value::Expr(e) => match self.expr(&e) {
                    Some(v) => out.push(v),
                    None => poisoned = true,
                },
                other => {
                    self.error(other.span(), format!("{}: arguments must be tensors", a.op));
                    poisoned = true;
                }
            }
        }
        (!poisoned).then_some(out)
    }
}

#[derive(Debug)]
pub enum Padding {
    Same,
    Valid,
    Explicit([usize; 4]),
}

/// The arguments of one call, consumed as the op's lowering asks for them; what is left at the
/// end is reported as unexpected.
struct Args<'a> {
    op: String,
    op_span: Span,
    positional: std::collections::VecDeque<(usize, Value)>,
    named: Vec<(&'a Ident, &'a Value)>,
    params: Vec<(&'a ParamName, &'a ParamType)>,
    taken_named: Vec<String>,
    all_positional: Vec<Span>,
}

impl<'a> Args<'a> {
    fn new(op: &Ident, args: &'a [Arg]) -> Self {
        let mut a = Args {
            op: op.to_string(),
            op_span: op.span(),
            positional: Default::default(),
            named: Vec::new(),
            params: Vec::new(),
            taken_named: Vec::new(),
            all_positional: Vec::new(),
        };
        for arg in args {
            match arg {
                Arg::Positional(v) => {
                    a.all_positional.push(v.span());
                    a.positional
                        .push_back((a.all_positional.len() - 1, v.clone()));
                }
                Arg::Named { name, value } => a.named.push((name, value)),
                Arg::Param { name, ty } => a.params.push((name, ty)),
            }
        }
        a
    }

    fn positional_span(&self, i: usize) -> Option<Span> {
        self.all_positional.get(i).copied()
    }

    fn named_span(&self, name: &str) -> Option<Span> {
        self.named
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, _)| n.span())
    }

    fn take_positional(&mut self) -> Option<Value> {
        self.positional.pop_front().map(|(_, v)| v)
    }

    fn positional_type(&mut self, cx: &mut Lower) -> Option<TypeExpr> {
        match self.take_positional()? {
            Value::Type(t) => Some(t),
            other => {
                cx.error(
                    other.span(),
                    format!("{}: expected a type like `vec<256xf32>`", self.op),
                );
                None
            }
        }
    }

    fn positional_pair(&mut self, cx: &mut Lower, what: &str) -> Option<[usize; 2]> {
        match self.take_positional() {
            Some(v) => pair_of(cx, &v, &format!("{}: the window", self.op)),
            None => {
                cx.error(self.op_span, format!("{}: missing {what}", self.op));
                None
            }
        }
    }

    fn param(&mut self, cx: &mut Lower, what: &str) -> Option<(&'a ParamName, &'a ParamType)> {
        if self.params.is_empty() {
            cx.error(self.op_span, format!("{}: missing {what}", self.op));
            return None;
        }
        Some(self.params.remove(0))
    }

    fn named(&mut self, name: &str) -> Option<&'a Value> {
        let pos = self.named.iter().position(|(n, _)| *n == name)?;
        self.taken_named.push(name.to_string());
        Some(self.named.remove(pos).1)
    }

    fn float(&mut self, cx: &mut Lower, name: &str, default: f64) -> Option<f64> {
        match self.named(name) {
            None => Some(default),
            Some(Value::Float(f, _)) => Some(*f),
            Some(Value::Int(n)) => Some(n.value as f64),
            Some(other) => {
                cx.error(
                    other.span(),
                    format!("{}: `{name}` must be a number", self.op),
                );
                None
            }
        }
    }

    fn bool(&mut self, cx: &mut Lower, name: &str, default: bool) -> Option<bool> {
        match self.named(name) {
            None => Some(default),
            Some(Value::Expr(Expr::Name(i))) if i == "true" => Some(true),
            Some(Value::Expr(Expr::Name(i))) if i == "false" => Some(false),
            Some(other) => {
                cx.error(
                    other.span(),
                    format!("{}: `{name}` must be `true` or `false`", self.op),
                );
                None
            }
        }
    }

    fn usize(&mut self, cx: &mut Lower, name: &str) -> Option<Option<usize>> {
        match self.named(name) {
            None => Some(None),
            Some(Value::Int(n)) => Some(Some(n.value)),
            Some(other) => {
                cx.error(
                    other.span(),
                    format!("{}: `{name}` must be a whole number", self.op),
                );
                None
            }
        }
    }

    fn pair(&mut self, cx: &mut Lower, name: &str) -> Option<Option<[usize; 2]>> {
        match self.named(name) {
            None => Some(None),
            Some(v) => pair_of(cx, v, &format!("{}: `{name}`", self.op)).map(Some),
        }
    }

    fn padding(&mut self, cx: &mut Lower) -> Option<Padding> {
        match self.named("pad") {
            None => Some(Padding::Valid),
            Some(Value::Expr(Expr::Name(i))) if i == "same" => Some(Padding::Same),
            Some(Value::Expr(Expr::Name(i))) if i == "valid" => Some(Padding::Valid),
            Some(v) => pads_of(cx, v).map(Padding::Explicit),
        }
    }

    /// Reports arguments nobody asked for; returns whether there were none. After a failed op
    /// (`lowered == false`) only names the op does not know at all are reported.
    fn finish(self, cx: &mut Lower, lowered: bool) -> bool {
        let allowed = allowed_named(&self.op);
        let before = cx.errors.len();
        for (name, _) in &self.named {
            let known = allowed.iter().any(|a| *name == a);
            let msg = if self.taken_named.iter().any(|t| *name == t) {
                format!("{}: `{name}` is given twice", self.op)
            } else if known {
                // Left unread because the op failed before it got there.
                continue;
            } else if allowed.is_empty() {
                format!(
                    "{}: unexpected argument `{name}`; it takes no named arguments",
                    self.op
                )
            } else {
                let hint = closest(&name.to_string(), allowed)
                    .map(|c| format!("did you mean `{c}`? "))
                    .unwrap_or_default();
                format!(
                    "{}: unknown argument `{name}`; {hint}expected one of: {}",
                    self.op,
                    allowed.join(", ")
                )
            };
            cx.error(name.span(), msg);
        }
        if lowered {
            for (name, _) in &self.params {
                cx.error(
                    name.span,
                    format!("{}: unexpected parameter `{}`", self.op, name.key),
                );
            }
            for (_, v) in &self.positional {
                cx.error(v.span(), format!("{}: too many arguments", self.op));
            }
        }
        cx.errors.len() == before
    }
}

fn allowed_named(op: &str) -> &'static [&'static str] {
    match op {
        "conv2d" => &["stride", "pad", "dilation", "groups", "bias"],
        "dense" => &["bias"],
        "batch_norm" => &["eps"],
        "clip" => &["min", "max"],
        "leaky_relu" => &["alpha"],
        "max_pool" => &["stride", "pad"],
        "avg_pool" => &["stride", "pad", "count_include_pad"],
        "pad" => &["value"],
        _ => &[],
    }
}

fn pair_of(cx: &mut Lower, v: &Value, op: &str) -> Option<[usize; 2]> {
    match v {
        Value::Int(n) => Some([n.value, n.value]),
        Value::Dims(d, _) if d.len() == 2 => Some([d[0].value, d[1].value]),
        Value::Tuple(items, _) if items.len() == 2 => {
            let a = int_of(cx, &items[0], op)?;
            let b = int_of(cx, &items[1], op)?;
            Some([a, b])
        }
        other => {
            cx.error(
                other.span(),
                format!("{op} must be one size or two, like `2`, `2x2` or `(2, 1)`"),
            );
            None
        }
    }
}

fn pads_of(cx: &mut Lower, v: &Value) -> Option<[usize; 4]> {
    let ints = |cx: &mut Lower, items: &[Value]| -> Option<Vec<usize>> {
        items.iter().map(|i| int_of(cx, i, "pad")).collect()
    };
    match v {
        Value::Int(n) => Some([n.value; 4]),
        Value::Tuple(items, _) if items.len() == 2 => {
            let p = ints(cx, items)?;
            Some([p[0], p[1], p[0], p[1]])
        }
        Value::Tuple(items, _) if items.len() == 4 => {
            let p = ints(cx, items)?;
            Some([p[0], p[1], p[2], p[3]])
        }
        other => {
            cx.error(
                other.span(),
                "expected padding: `same`, `valid`, `1`, `(h, w)` or `(top, left, bottom, right)`",
            );
            None
        }
    }
}

fn int_of(cx: &mut Lower, v: &Value, op: &str) -> Option<usize> {
    match v {
        Value::Int(Num { value, .. }) => Some(*value),
        other => {
            cx.error(other.span(), format!("{op}: expected a whole number"));
            None
        }
    }
}

/// Numpy broadcasting of two shapes of the same kind and rank.
pub fn broadcast(a: &Shape, b: &Shape) -> Option<Shape> {
    if a.kind != b.kind {
        return None;
    }
    let dims = a
        .dims
        .iter()
        .zip(&b.dims)
        .map(|(&x, &y)| match (x, y) {
            _ if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Shape { kind: a.kind, dims })
}

/// The known name closest to `name` (edit distance at most 2), for "did you mean" hints.
pub(crate) fn closest<'a>(name: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// `1 channel`, `3 channels`.
fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Bytes the planner reserves for an f32 tensor of shape `dims`: 4 per element, rounded up to its
/// 64-byte alignment (at least 64). `None` if that does not fit in `usize`.
fn reserved_bytes(dims: &[usize]) -> Option<usize> {
    let elements = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?;
    Some(
        elements
            .checked_mul(4)?
            .checked_next_multiple_of(64)?
            .max(64),
    )
}
