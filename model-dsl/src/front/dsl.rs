//! The DSL front end: a parsed `network!` ([`NetworkDef`]) becomes an untyped [`Graph`].
//!
//! This pass resolves names, reads every op's arguments ([`super::args`]), checks what the
//! declarations say on their own (a known dtype, kernel sizes of at least 1, groups that divide
//! the declared channels, a positive epsilon) and declares the parameters. It computes no
//! shapes: everything that depends on an input's size is [`crate::infer`]'s job, so the same
//! rules serve every front end.
//!
//! Every span a diagnostic may point at goes into [`Spans`], the location table; the graph and
//! the passes hold only its [`Loc`]s, and [`Spans::render`] turns a [`Diag`] back into a
//! `syn::Error` at the user's token. Errors are collected, not returned at the first one: an op
//! whose arguments are wrong adds nothing to the graph, its name is bound to a *poisoned*
//! value (`None`), and ops reading a poisoned value are not built either, so one mistake gives
//! one error.

use std::collections::HashMap;

use proc_macro2::Span;
use syn::Ident;

use super::args::{pads_of, Args};
use crate::diag::{closest, plural, Diag, Errors, Loc};
use crate::ir::{
    Act, BinOp, CmpOp, DType, Dim, Graph, Input, Kind, MathOp, OpKind, Output, PoolKind, Pos,
    Producer, ReduceKind, ReshapeTo, SeqSplit, Shape, SymId, TensorType, ValueId, MAX_RANK,
};
use crate::syntax::{
    error_range, Arg, Body, Dtype, Expr, LayoutMap, NetworkDef, ParamName, ParamType, SizeExpr,
    Stmt, TypeExpr, TypeKind, Value, WhereClause,
};

/// The operations the DSL knows, for "unknown operation" messages.
pub const OPS: &[&str] = &[
    "conv",
    "conv2d",
    "conv_transpose",
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
    "log_softmax",
    "transpose",
    "matmul",
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "split",
    "sqrt",
    "exp",
    "log",
    "neg",
    "abs",
    "reciprocal",
    "erf",
    "softplus",
    "softsign",
    "cast",
    "gather",
    "slice",
    "squeeze",
    "unsqueeze",
    "nonzero",
    "range",
    "equal",
    "less",
    "greater",
    "less_equal",
    "greater_equal",
    "pow",
    "seq_empty",
    "seq_construct",
    "insert",
    "erase",
    "at",
    "len",
    "split_to_seq",
    "concat_from_seq",
    "view",
    "relu_",
    "relu6_",
    "sigmoid_",
    "tanh_",
    "clip_",
    "leaky_relu_",
    "add_",
    "sub_",
    "mul_",
    "div_",
];

/// The sequence ops, lowered by `seq_op`.
const SEQ_OPS: &[&str] = &[
    "seq_empty",
    "seq_construct",
    "insert",
    "erase",
    "at",
    "len",
    "split_to_seq",
    "concat_from_seq",
];

/// The DSL's location table: each [`Loc`] is a token, or a range of tokens from the first to
/// the last.
#[derive(Debug, Default)]
pub struct Spans(Vec<(Span, Option<Span>)>);

impl Spans {
    pub fn at(&mut self, span: Span) -> Loc {
        self.0.push((span, None));
        Loc(self.0.len() as u32 - 1)
    }
    pub fn range(&mut self, start: Span, end: Span) -> Loc {
        self.0.push((start, Some(end)));
        Loc(self.0.len() as u32 - 1)
    }
    /// The diagnostic as a `syn::Error` at its token (or range).
    pub fn render(&self, d: &Diag) -> syn::Error {
        match self.0.get(d.at.0 as usize) {
            Some((start, Some(end))) => error_range(*start, *end, &d.msg),
            Some((span, None)) => syn::Error::new(*span, &d.msg),
            None => syn::Error::new(Span::call_site(), &d.msg),
        }
    }
    /// All diagnostics as one `syn::Error`, or `None` if there were none.
    pub fn render_all(&self, errors: &Errors) -> Option<syn::Error> {
        errors.iter().map(|d| self.render(d)).reduce(|mut a, b| {
            a.combine(b);
            a
        })
    }
}

/// What the front end made of a network.
#[derive(Debug)]
pub struct Lowered {
    pub graph: Graph,
    pub spans: Spans,
    /// The `weights "file";` declaration, if any.
    pub weights_file: Option<syn::LitStr>,
}

pub fn lower(def: &NetworkDef, errors: &mut Errors) -> Lowered {
    let mut cx = Builder {
        graph: Graph::default(),
        spans: Spans::default(),
        scope: HashMap::new(),
        errors,
        param_keys: HashMap::new(),
        symbol_spans: Vec::new(),
        results_wanted: None,
        seq_type_ok: false,
        run_seqs: 0,
    };
    for input in def.inputs.iter() {
        let i = cx.graph.inputs.len();
        if input.ty.seq {
            cx.seq_input(input);
            continue;
        }
        let Some(ty) = cx.declared_type(&input.ty, None) else {
            // Bound but poisoned: uses of it are not reported again as undefined.
            cx.scope.insert(input.name.to_string(), None);
            continue;
        };
        if ty.dims.contains(&Dim::Any) {
            cx.error(input.ty.span, format!("input `{}`: `?` sizes are for outputs only; give an input's sizes as numbers or as names listed in `where`", input.name));
            cx.scope.insert(input.name.to_string(), None);
            continue;
        }
        let loc = cx.spans.at(input.name.span());
        // With a layout map the caller passes another axis order; one transpose at the
        // boundary gives the network its own.
        let (ty, perm) = match &input.ty.layout {
            Some(map) => match cx.layout_map(map, &ty) {
                Some((user, perm)) => (user, Some(perm)),
                None => {
                    cx.scope.insert(input.name.to_string(), None);
                    continue;
                }
            },
            None => (ty, None),
        };
        let v = cx.graph.add_value(Producer::Input(i), loc);
        cx.graph.values[v.index()].name = Some(input.name.to_string());
        let ty_loc = cx.spans.at(input.ty.span);
        cx.graph.inputs.push(Input {
            name: input.name.to_string(),
            value: v,
            ty,
            loc: ty_loc,
        });
        let v = match perm {
            Some(perm) => {
                let t =
                    cx.graph
                        .add_op(OpKind::Transpose { perm }, vec![v], 1, loc, vec![loc], None)[0];
                cx.graph.values[t.index()].name = Some(input.name.to_string());
                t
            }
            None => v,
        };
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
    cx.variants(def.variants.as_ref());
    Lowered {
        graph: cx.graph,
        spans: cx.spans,
        weights_file,
    }
}

pub(super) struct Builder<'e> {
    graph: Graph,
    spans: Spans,
    /// Visible names; `None` marks a poisoned binding (its op had an error).
    scope: HashMap<String, Option<ValueId>>,
    errors: &'e mut Errors,
    param_keys: HashMap<String, Span>,
    /// Where each size symbol was first written.
    symbol_spans: Vec<Span>,
    /// How many names the `let` being lowered binds (for `split` with run-time sizes).
    results_wanted: Option<usize>,
    /// Whether a `seq<...>` type is allowed where a type is being read (an output's).
    seq_type_ok: bool,
    /// Sequence inputs without a length so far (each one's `OpKind::SeqInput::slot`).
    run_seqs: usize,
}

impl Builder<'_> {
    pub(super) fn error(&mut self, span: Span, msg: impl std::fmt::Display) {
        let at = self.spans.at(span);
        self.errors.push(at, msg);
    }

    pub(super) fn error_count(&self) -> usize {
        self.errors.len()
    }

    /// Adds a single-result op.
    fn add_op(
        &mut self,
        kind: OpKind,
        args: Vec<ValueId>,
        span: Span,
        arg_spans: &[Span],
        decl: Option<Loc>,
    ) -> Option<ValueId> {
        let loc = self.spans.at(span);
        let arg_locs = arg_spans.iter().map(|s| self.spans.at(*s)).collect();
        Some(self.graph.add_op(kind, args, 1, loc, arg_locs, decl)[0])
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
                Stmt::Let { names, value } => {
                    let vs = self.exprs(value, names.len());
                    for (i, name) in names.iter().enumerate() {
                        let v = vs.as_ref().map(|vs| vs[i]);
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
        for ty in &def.outputs {
            if let Some(map) = &ty.layout {
                self.error(map.span, "a layout map is only allowed on inputs");
            }
        }
        for (expr, ty) in results.into_iter().zip(&def.outputs) {
            let v = self.expr(expr);
            self.seq_type_ok = true;
            let declared = self.declared_type(ty, None);
            self.seq_type_ok = false;
            let (Some(v), Some(declared)) = (v, declared) else {
                continue;
            };
            let ty_loc = self.spans.range(ty.span, ty.end);
            self.graph.outputs.push(Output {
                value: v,
                ty: declared,
                ty_loc,
                seq: ty.seq,
            });
        }
        weights_file
    }

    /// Resolves a DSL type. `batch` is the batch to use when the type gives none (for
    /// `reshape`, the input's, filled in by inference); model inputs and outputs default to 1.
    fn declared_type(&mut self, ty: &TypeExpr, batch: Option<usize>) -> Option<TensorType> {
        if ty.seq && !self.seq_type_ok {
            self.error(
                ty.span,
                "a sequence type `seq<...>` is only allowed as a network's output (for now)",
            );
            return None;
        }
        if ty.kind == TypeKind::Tensor {
            let dtype = self.any_dtype(&ty.dtype)?;
            return self.tensor_type(ty, dtype);
        }
        let dtype = self.check_dtype(&ty.dtype)?;
        let n = ty.batch.map(|b| b.value).or(batch).unwrap_or(1);
        let mut nums = vec![ty.channels];
        nums.extend(ty.batch);
        let (dims, kind) = match (ty.kind, &ty.spatial) {
            (TypeKind::Fm, Some(sp)) if sp.len() == 2 => {
                nums.extend(sp.iter().copied());
                (
                    vec![n, ty.channels.value, sp[0].value, sp[1].value],
                    Kind::Fm,
                )
            }
            (TypeKind::Fm, _) => {
                self.error(
                    ty.span,
                    "a feature map needs two spatial sizes, like `fm<3xf32[224,224]>`",
                );
                return None;
            }
            (TypeKind::Vec, None) => (vec![n, ty.channels.value], Kind::Vec),
            (TypeKind::Vec, Some(_)) => {
                self.error(
                    ty.span,
                    "a vector has no spatial sizes: write `vec<10xf32>` or use `fm<...>`",
                );
                return None;
            }
            (TypeKind::Tensor, _) => return self.tensor_type(ty, dtype),
        };
        if let Some(zero) = nums.iter().find(|n| n.value == 0) {
            self.error(
                zero.span,
                "sizes must be at least 1 (an empty tensor is a `tensor<f32[0, ...]>`)",
            );
            return None;
        }
        Some(TensorType {
            dtype,
            dims: dims.into_iter().map(Dim::Known).collect(),
            kind,
        })
    }

    /// A layout map on an input of type `ty` (a feature map, `(N, C, spatial...)`): the type the
    /// caller's buffer has, and the permutation from it to `ty`.
    fn layout_map(&mut self, map: &LayoutMap, ty: &TensorType) -> Option<(TensorType, Vec<usize>)> {
        let names: &[&str] = match ty.dims.len() {
            4 => &["N", "C", "H", "W"],
            _ => {
                self.error(
                    map.span,
                    "a layout map needs a feature map `fm<C x f32 [H, W], ...>`",
                );
                return None;
            }
        };
        let to: Vec<String> = map.to.iter().map(|i| i.to_string()).collect();
        if to != names {
            self.error(
                map.span,
                format!(
                    "the layout map must map onto the feature map's own order ({}); found ({})",
                    names.join(","),
                    to.join(",")
                ),
            );
            return None;
        }
        let mut from: Vec<String> = map.batch.iter().map(|b| b.to_string()).collect();
        from.extend(map.from.iter().map(|i| i.to_string()));
        let mut sorted = from.clone();
        sorted.sort();
        let mut want: Vec<&str> = names.to_vec();
        want.sort_unstable();
        if sorted != want {
            self.error(
                map.span,
                format!(
                    "the caller's layout ({}) must name each of {} once",
                    from.join(","),
                    names.join(", ")
                ),
            );
            return None;
        }
        // `perm[i]`: where the network's axis `i` is in the caller's buffer.
        let perm: Vec<usize> = names
            .iter()
            .map(|n| from.iter().position(|f| f == n).unwrap_or(0))
            .collect();
        let user = TensorType {
            dtype: ty.dtype,
            dims: from
                .iter()
                .map(|f| ty.dims[names.iter().position(|n| n == f).unwrap_or(0)])
                .collect(),
            kind: Kind::Tensor,
        };
        Some((user, perm))
    }

    /// `tensor<dtype[sizes]>`; symbols are registered in the graph's symbol table.
    fn tensor_type(&mut self, ty: &TypeExpr, dtype: DType) -> Option<TensorType> {
        let mut dims = Vec::new();
        for d in &ty.dims {
            dims.push(match d {
                // A size may be 0 (an empty tensor, as ONNX allows): inference refuses the ops
                // that would have to compute something from no elements.
                SizeExpr::Num(n) => Dim::Known(n.value),
                SizeExpr::Sym(sym) => {
                    let name = sym.to_string();
                    let span = sym.span();
                    let id = match self.graph.symbols.iter().position(|s| *s == name) {
                        Some(i) => i,
                        None => {
                            self.graph.symbols.push(name);
                            self.symbol_spans.push(span);
                            self.graph.symbols.len() - 1
                        }
                    };
                    Dim::Sym(SymId(id as u32))
                }
                SizeExpr::Any(_) => Dim::Any,
            });
        }
        if dims.len() > MAX_RANK {
            self.error(
                ty.span,
                format!("a tensor may have at most {MAX_RANK} dimensions"),
            );
            return None;
        }
        Some(TensorType {
            dtype,
            dims,
            kind: Kind::Tensor,
        })
    }

    /// The `where` clause: one binding of the size symbols per listed shape. Every symbol a type
    /// uses must be listed, every listed name must be used, and every entry gives one size per
    /// name.
    fn variants(&mut self, clause: Option<&WhereClause>) {
        let Some(w) = clause else {
            for (name, span) in self
                .graph
                .symbols
                .clone()
                .iter()
                .zip(self.symbol_spans.clone())
            {
                self.error(span, format!("the size `{name}` has no value: list the shapes to compile after the output type, like `where {name} in [1, 8]`"));
            }
            self.graph.bindings = vec![Vec::new()];
            return;
        };
        let before = self.error_count();
        let mut slot = Vec::new();
        for (i, name) in w.names.iter().enumerate() {
            if w.names[..i].iter().any(|n| n == name) {
                self.error(name.span(), format!("`{name}` is listed twice"));
            }
            match self.graph.symbols.iter().position(|s| name == s) {
                Some(s) => slot.push(s),
                None => self.error(
                    name.span(),
                    format!(
                        "`{name}` is not a size of any declared type; the types name {}",
                        if self.graph.symbols.is_empty() {
                            "no sizes".to_string()
                        } else {
                            self.graph
                                .symbols
                                .iter()
                                .map(|s| format!("`{s}`"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        }
                    ),
                ),
            }
        }
        for (name, span) in self
            .graph
            .symbols
            .clone()
            .iter()
            .zip(self.symbol_spans.clone())
        {
            if !w.names.iter().any(|n| n == name) {
                self.error(
                    span,
                    format!("the size `{name}` is not listed in the `where` clause"),
                );
            }
        }
        if w.values.is_empty() {
            self.error(w.span, "`where` lists no shapes");
        }
        let mut bindings: Vec<Vec<usize>> = Vec::new();
        for (nums, span) in &w.values {
            if nums.len() != w.names.len() {
                let names: Vec<String> = w.names.iter().map(|n| n.to_string()).collect();
                self.error(
                    *span,
                    format!(
                        "this entry gives {} for {} ({})",
                        plural(nums.len(), "size"),
                        plural(names.len(), "name"),
                        names.join(", ")
                    ),
                );
                continue;
            }
            if let Some(zero) = nums.iter().find(|n| n.value == 0) {
                self.error(zero.span, "sizes must be at least 1");
                continue;
            }
            let mut b = vec![0; self.graph.symbols.len()];
            for (&s, n) in slot.iter().zip(nums) {
                b[s] = n.value;
            }
            if bindings.contains(&b) {
                self.error(*span, "this shape is listed twice");
                continue;
            }
            bindings.push(b);
        }
        if self.error_count() == before {
            self.graph.bindings = bindings;
        }
    }

    /// A `tensor<...>`'s element type: any dtype the IR has.
    fn any_dtype(&mut self, dtype: &Dtype) -> Option<DType> {
        let d = DType::from_name(&dtype.name);
        if d.is_none() {
            let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
            self.error(
                dtype.span,
                format!(
                    "unknown dtype `{}`: expected one of {}",
                    dtype.name,
                    names.join(", ")
                ),
            );
        }
        d
    }

    fn check_dtype(&mut self, dtype: &Dtype) -> Option<DType> {
        match dtype.name.as_str() {
            "f32" => Some(DType::F32),
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

    /// An expression that gives `n` values (a `let (a, b) = split(...)`).
    fn exprs(&mut self, expr: &Expr, n: usize) -> Option<Vec<ValueId>> {
        let vs = match expr {
            Expr::Call { op, args } => {
                // A `split` with run-time sizes has as many results as the `let` binds.
                self.results_wanted = Some(n);
                let vs = self.call(op, args);
                self.results_wanted = None;
                vs?
            }
            other => vec![self.expr(other)?],
        };
        if vs.len() != n {
            let what = if n == 1 {
                "one name".to_string()
            } else {
                format!("{n} names")
            };
            self.error(
                expr.span(),
                format!(
                    "this gives {} but the `let` binds {what}",
                    plural(vs.len(), "value")
                ),
            );
            return None;
        }
        Some(vs)
    }

    fn expr(&mut self, expr: &Expr) -> Option<ValueId> {
        match expr {
            Expr::Param { name, ty } => {
                let t = self.declared_type(ty, None)?;
                let Some(shape) = t.known() else {
                    self.error(ty.span, "a parameter's sizes must be numbers");
                    return None;
                };
                if shape.dtype != DType::F32 {
                    self.error(
                        ty.dtype.span,
                        format!("parameters are f32 for now, not {}", shape.dtype),
                    );
                    return None;
                }
                self.declare_param(name.key.clone(), name, ty.span, ty.end, shape)
            }
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
            Expr::Call { op, args } => {
                let vs = self.call(op, args)?;
                if vs.len() != 1 {
                    self.error(
                        op.span(),
                        format!(
                            "`{op}` gives {} here; bind them with `let ({}) = ...`",
                            plural(vs.len(), "value"),
                            (0..vs.len())
                                .map(|i| format!("y{i}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    );
                    return None;
                }
                Some(vs[0])
            }
        }
    }

    fn call(&mut self, op: &Ident, args: &[Arg]) -> Option<Vec<ValueId>> {
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
        // `relu_`, `add_`, ...: the op itself, declared to write over its first argument.
        let in_place = name.strip_suffix('_').filter(|_| name != "view");
        let name = in_place.map_or(name.clone(), str::to_string);
        let result = if name == "split" {
            self.split(span, &mut a)
        } else if SEQ_OPS.contains(&name.as_str()) {
            self.seq_op(&name, span, &mut a).map(|v| vec![v])
        } else {
            self.op(&name, span, &mut a).map(|v| vec![v])
        };
        if let (Some(_), Some(v)) = (in_place, result.as_ref().and_then(|r| r.first())) {
            if let Producer::Op { op, .. } = self.graph.values[v.index()].producer {
                self.graph.ops[op.index()].in_place = true;
            }
        }
        // An op that failed stopped reading its arguments; only misspelt names are worth
        // reporting then. An op with a misspelt argument fails too: it ran without it.
        let clean = a.finish(self, result.is_some());
        result.filter(|_| clean)
    }

    /// Lowers one known op. Returns `None` if it (or one of its inputs) had an error.
    fn op(&mut self, name: &str, span: Span, a: &mut Args) -> Option<ValueId> {
        let arg1 = a.positional_spans().first().copied().unwrap_or(span);
        match name {
            "conv" | "conv2d" | "conv_transpose" => self.conv(name, span, a),
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
                let stats = self.norm_params(pname, pty, channels.value)?;
                let decl = self.spans.at(channels.span);
                let mut args = vec![x];
                args.extend(stats);
                self.add_op(
                    OpKind::BatchNorm {
                        eps: eps? as f32,
                        act: Act::None,
                    },
                    args,
                    span,
                    &[arg1],
                    Some(decl),
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
                self.add_op(OpKind::Unary(act), vec![x], span, &[arg1], None)
            }
            "add" | "sub" | "mul" | "div" => {
                let [x, y] = self.operands(a, span)?;
                let op = match name {
                    "add" => BinOp::Add,
                    "sub" => BinOp::Sub,
                    "mul" => BinOp::Mul,
                    _ => BinOp::Div,
                };
                let spans = a.positional_spans().to_vec();
                self.add_op(OpKind::Binary(op), vec![x, y], span, &spans, None)
            }
            "max_pool" | "avg_pool" => {
                let x = self.inputs::<1>(a, span)?[0];
                let window = a.peek_positional(0).map(|v| self.spans.at(v.span()));
                let kernel = a.positional_sizes(self, "a window size like `2x2`", None)?;
                // The spatial rank, if the window says it (`2x2x2`); else inference finds it.
                let n = (kernel.len() > 1).then_some(kernel.len());
                let stride = a.sizes(self, "stride", n)?.unwrap_or(kernel.clone());
                let every = |v: Vec<usize>| match n {
                    Some(n) if v.len() == 1 => vec![v[0]; n],
                    _ => v,
                };
                let stride = every(stride);
                let dilation = a.sizes(self, "dilation", n)?.map(every).unwrap_or_default();
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
                let pad = a.padding(self, n)?;
                self.add_op(
                    OpKind::Pool {
                        kind,
                        kernel,
                        stride,
                        dilation,
                        pad,
                        count_include_pad,
                    },
                    vec![x],
                    span,
                    &[arg1],
                    window,
                )
            }
            "global_avg_pool" => {
                let x = self.inputs::<1>(a, span)?[0];
                self.add_op(OpKind::GlobalAvgPool, vec![x], span, &[arg1], None)
            }
            "concat" => {
                let xs = self.variadic_inputs(a)?;
                if xs.len() < 2 {
                    self.error(span, "concat: needs at least two inputs");
                    return None;
                }
                let axis = a.int(self, "axis")?.unwrap_or(1);
                let spans = a.positional_spans().to_vec();
                self.add_op(OpKind::Concat { axis }, xs, span, &spans, None)
            }
            "transpose" => {
                let x = self.inputs::<1>(a, span)?[0];
                let Some(Value::List(perm, list_span)) = a.take_positional() else {
                    self.error(
                        span,
                        "transpose: expected the permutation, like `transpose(x, [0, 2, 1])`",
                    );
                    return None;
                };
                let decl = self.spans.at(list_span);
                let Some(perm) = perm
                    .iter()
                    .map(|&p| usize::try_from(p).ok())
                    .collect::<Option<Vec<_>>>()
                else {
                    self.errors.push(
                        decl,
                        "transpose: the permutation's entries must be axes 0, 1, ...",
                    );
                    return None;
                };
                self.add_op(
                    OpKind::Transpose { perm },
                    vec![x],
                    span,
                    &[arg1],
                    Some(decl),
                )
            }
            "matmul" => {
                let [x, y] = self.inputs::<2>(a, span)?;
                let spans = a.positional_spans().to_vec();
                self.add_op(OpKind::MatMul, vec![x, y], span, &spans, None)
            }
            "reduce_sum" | "reduce_mean" | "reduce_max" => {
                let x = self.inputs::<1>(a, span)?[0];
                let kind = match name {
                    "reduce_sum" => ReduceKind::Sum,
                    "reduce_mean" => ReduceKind::Mean,
                    _ => ReduceKind::Max,
                };
                let decl = a.named_span("axes").map(|s| self.spans.at(s));
                let Some(axes) = a.list(self, "axes")? else {
                    self.error(
                        span,
                        format!("{name}: expected the axes, like `{name}(x, axes = [-1])`"),
                    );
                    return None;
                };
                let keepdims = a.bool(self, "keepdims", true)?;
                self.add_op(
                    OpKind::Reduce {
                        kind,
                        axes,
                        keepdims,
                    },
                    vec![x],
                    span,
                    &[arg1],
                    decl,
                )
            }
            "cast" => {
                let x = self.inputs::<1>(a, span)?[0];
                let to = match a.take_positional() {
                    Some(Value::Expr(Expr::Name(n))) => match DType::from_name(&n.to_string()) {
                        Some(d) => d,
                        None => {
                            self.error(n.span(), format!("cast: `{n}` is not a dtype"));
                            return None;
                        }
                    },
                    other => {
                        let at = other.map_or(span, |v| v.span());
                        self.error(
                            at,
                            "cast: expected the dtype to cast to, like `cast(x, f32)`",
                        );
                        return None;
                    }
                };
                self.add_op(OpKind::Cast(to), vec![x], span, &[arg1], None)
            }
            "gather" => {
                let x = self.inputs::<1>(a, span)?[0];
                let axis = a.int(self, "axis")?.unwrap_or(0);
                match a.take_positional() {
                    Some(Value::List(items, list_span)) => {
                        let decl = self.spans.at(list_span);
                        let kind = OpKind::Gather {
                            axis,
                            indices: Some(items),
                        };
                        self.add_op(kind, vec![x], span, &[arg1], Some(decl))
                    }
                    Some(Value::Expr(e)) => {
                        let at = e.span();
                        let idx = self.expr(&e)?;
                        let kind = OpKind::Gather {
                            axis,
                            indices: None,
                        };
                        self.add_op(kind, vec![x, idx], span, &[arg1, at], None)
                    }
                    other => {
                        let at = other.map_or(span, |v| v.span());
                        self.error(at, "gather: expected the indices: a tensor of i64, or a list like `[0, 2]`");
                        None
                    }
                }
            }
            "slice" if a.named_is_expr("starts") || a.named_is_expr("ends") => {
                let x = self.inputs::<1>(a, span)?[0];
                let decl = a.named_span("starts").map(|s| self.spans.at(s));
                let (starts_span, ends_span) = (
                    a.named_span("starts").unwrap_or(span),
                    a.named_span("ends").unwrap_or(span),
                );
                let (Some(s), Some(e)) = (a.named_expr("starts"), a.named_expr("ends")) else {
                    self.error(span, "slice: with run-time bounds, `starts` and `ends` are both tensors of i64 (and `steps` is 1)");
                    return None;
                };
                let (s, e) = (self.expr(&s)?, self.expr(&e)?);
                let Some(axes) = a.list(self, "axes")? else {
                    self.error(
                        span,
                        "slice: with run-time bounds, give the axes as a list, like `axes = [0]`",
                    );
                    return None;
                };
                self.add_op(
                    OpKind::SliceDyn { axes },
                    vec![x, s, e],
                    span,
                    &[arg1, starts_span, ends_span],
                    decl,
                )
            }
            "range" => {
                let [start, limit, delta] = self.inputs::<3>(a, span)?;
                let spans = a.positional_spans().to_vec();
                self.add_op(OpKind::Range, vec![start, limit, delta], span, &spans, None)
            }
            "nonzero" => {
                let x = self.inputs::<1>(a, span)?[0];
                self.add_op(OpKind::NonZero, vec![x], span, &[arg1], None)
            }
            "pow" => {
                let [x, y] = self.operands(a, span)?;
                let spans = a.positional_spans().to_vec();
                self.add_op(OpKind::Pow, vec![x, y], span, &spans, None)
            }
            "equal" | "less" | "greater" | "less_equal" | "greater_equal" => {
                let [x, y] = self.operands(a, span)?;
                let c = CmpOp::ALL
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, c)| *c)?;
                let spans = a.positional_spans().to_vec();
                self.add_op(OpKind::Compare(c), vec![x, y], span, &spans, None)
            }
            "slice" => {
                let x = self.inputs::<1>(a, span)?[0];
                let decl = a.named_span("starts").map(|s| self.spans.at(s));
                let starts = a.list(self, "starts")?;
                let ends = a.list(self, "ends")?;
                let (Some(starts), Some(ends)) = (starts, ends) else {
                    self.error(span, "slice: expected `starts = [...]` and `ends = [...]`");
                    return None;
                };
                let axes = a.list(self, "axes")?.unwrap_or_default();
                let steps = a.list(self, "steps")?.unwrap_or_default();
                let kind = OpKind::Slice {
                    starts,
                    ends,
                    axes,
                    steps,
                };
                self.add_op(kind, vec![x], span, &[arg1], decl)
            }
            "squeeze" | "unsqueeze" => {
                let x = self.inputs::<1>(a, span)?[0];
                let decl = a.named_span("axes").map(|s| self.spans.at(s));
                let axes = a.list(self, "axes")?;
                let kind = match (name, axes) {
                    ("squeeze", axes) => OpKind::Squeeze {
                        axes: axes.unwrap_or_default(),
                    },
                    (_, Some(axes)) => OpKind::Unsqueeze { axes },
                    (_, None) => {
                        self.error(
                            span,
                            "unsqueeze: expected the axes, like `unsqueeze(x, axes = [0])`",
                        );
                        return None;
                    }
                };
                self.add_op(kind, vec![x], span, &[arg1], decl)
            }
            "sqrt" | "exp" | "log" | "neg" | "abs" | "reciprocal" | "erf" | "softplus"
            | "softsign" => {
                let x = self.inputs::<1>(a, span)?[0];
                let m = MathOp::ALL
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, m)| *m)?;
                self.add_op(OpKind::Math(m), vec![x], span, &[arg1], None)
            }
            "flatten" => {
                let x = self.inputs::<1>(a, span)?[0];
                self.add_op(
                    OpKind::Reshape(ReshapeTo::Flatten),
                    vec![x],
                    span,
                    &[arg1],
                    None,
                )
            }
            "reshape" if matches!(a.peek_positional(1), Some(Value::List(..))) => {
                let x = self.inputs::<1>(a, span)?[0];
                let Some(Value::List(dims, list_span)) = a.take_positional() else {
                    return None;
                };
                let decl = self.spans.at(list_span);
                self.add_op(
                    OpKind::Reshape(ReshapeTo::Dims(dims)),
                    vec![x],
                    span,
                    &[arg1],
                    Some(decl),
                )
            }
            "view" => {
                let x = self.inputs::<1>(a, span)?[0];
                let Some(ty) = a.positional_type(self) else {
                    self.error(span, "view: expected the view's type, like `view(x, tensor<f32[16,49]>, offset = 0)`");
                    return None;
                };
                let offset = a.usize(self, "offset")?.unwrap_or(0);
                let target = self.declared_type(&ty, None)?;
                let decl = self.spans.range(ty.span, ty.end);
                let kind = OpKind::View { ty: target, offset };
                self.add_op(kind, vec![x], span, &[arg1], Some(decl))
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
                let target = self.declared_type(&ty, Some(1))?;
                let decl = self.spans.range(ty.span, ty.end);
                self.add_op(
                    OpKind::Reshape(ReshapeTo::Type {
                        ty: target,
                        batch_given: ty.batch.is_some(),
                    }),
                    vec![x],
                    span,
                    &[arg1],
                    Some(decl),
                )
            }
            "softmax" | "log_softmax" => {
                let x = self.inputs::<1>(a, span)?[0];
                let decl = a.named_span("axis").map(|s| self.spans.at(s));
                let axis = a.int(self, "axis")?;
                let log = name == "log_softmax";
                self.add_op(OpKind::Softmax { axis, log }, vec![x], span, &[arg1], decl)
            }
            "pad" => {
                let x = self.inputs::<1>(a, span)?[0];
                let pad = match a.take_positional() {
                    Some(v) => pads_of(self, &v)?,
                    None => {
                        self.error(span, "pad: expected the padding, like `pad(h, 1)` or `pad(h, (top, left, bottom, right))`");
                        return None;
                    }
                };
                let value = a.float(self, "value", 0.0)? as f32;
                self.add_op(OpKind::Pad { pad, value }, vec![x], span, &[arg1], None)
            }
            _ => {
                // `OPS` and this match list the same names; a name in one only is a bug, reported
                // rather than panicked on.
                self.error(
                    span,
                    format!(
                        "kiln internal error: `{name}` is a known operation without a lowering"
                    ),
                );
                None
            }
        }
    }

    /// `conv` (1-, 2- or 3-D, as many spatial dimensions as the kernel has sizes), `conv2d`
    /// (2-D; one kernel size means a square window) and `conv_transpose` (as `conv`; weights
    /// `[c_in, c_out / groups, k...]` in the file, PyTorch's `ConvTranspose` layout).
    fn conv(&mut self, name: &str, span: Span, a: &mut Args) -> Option<ValueId> {
        let arg1 = a.positional_spans().first().copied().unwrap_or(span);
        let x = self.inputs::<1>(a, span)?[0];
        let (pname, pty) = a.param(self, "weights, like `w1: weights<3 -> 3x3xf32 -> 16>`")?;
        let ParamType::Weights {
            c_in,
            kernel: Some((kernel, dtype)),
            c_out,
            ..
        } = pty
        else {
            let example = if name == "conv2d" {
                "KhxKwxf32"
            } else {
                "3x3xf32"
            };
            self.error(
                pty.span(),
                format!("{name} weights need a kernel size: `weights<Cin -> {example} -> Cout>`"),
            );
            return None;
        };
        let kernel: Vec<usize> = match (name, kernel.as_slice()) {
            ("conv2d", [k]) => vec![k.value, k.value],
            ("conv2d", [h, w]) => vec![h.value, w.value],
            ("conv2d", _) => {
                self.error(dtype.span, "conv2d: expected a 2-D kernel like `3x3xf32`");
                return None;
            }
            (_, k) if (1..=3).contains(&k.len()) => k.iter().map(|k| k.value).collect(),
            _ => {
                self.error(
                    dtype.span,
                    format!("{name}: expected a kernel of 1, 2 or 3 sizes, like `3xf32`, `3x3xf32` or `3x3x3xf32`"),
                );
                return None;
            }
        };
        let n = kernel.len();
        let stride = a.sizes(self, "stride", Some(n))?;
        let dilation = a.sizes(self, "dilation", Some(n))?;
        let groups_span = a.named_span("groups").unwrap_or(span);
        let groups = a.usize(self, "groups")?.unwrap_or(1);
        let has_bias = a.bool(self, "bias", true)?;
        let pad = a.padding(self, Some(n))?;
        self.check_dtype(dtype)?;
        if kernel.contains(&0) || c_in.value == 0 || c_out.value == 0 {
            self.error(pty.span(), format!("{name}: sizes must be at least 1"));
            return None;
        }
        if groups == 0 || c_in.value % groups != 0 || c_out.value % groups != 0 {
            self.error(groups_span, format!("{name}: groups = {groups} must divide both the input channels ({}) and the output channels ({})", c_in.value, c_out.value));
            return None;
        }
        // One size means that size in every spatial dimension.
        let every = |v: Option<Vec<usize>>| match v {
            Some(v) if v.len() == 1 => vec![v[0]; n],
            Some(v) => v,
            None => vec![1; n],
        };
        let (stride, dilation) = (every(stride), every(dilation));
        let output_padding = match a.sizes(self, "output_padding", Some(n))? {
            Some(v) => every(Some(v)),
            None => vec![0; n],
        };
        if stride.contains(&0) || dilation.contains(&0) {
            self.error(
                span,
                format!("{name}: kernel, stride and dilation must be at least 1"),
            );
            return None;
        }
        let transposed = name == "conv_transpose";
        let mut shape = if transposed {
            vec![c_in.value, c_out.value / groups]
        } else {
            vec![c_out.value, c_in.value / groups]
        };
        shape.extend(&kernel);
        let w = self.param(pname, pty, "weight", shape)?;
        let mut args = vec![x, w];
        if has_bias {
            args.push(self.param(pname, pty, "bias", vec![c_out.value])?);
        }
        let decl = self.spans.at(c_in.span);
        if transposed {
            let kind = OpKind::ConvTranspose {
                c_in: c_in.value,
                kernel,
                stride,
                dilation,
                pad,
                output_padding,
                groups,
                has_bias,
            };
            return self.add_op(kind, args, span, &[arg1], Some(decl));
        }
        let kind = OpKind::Conv {
            c_in: c_in.value,
            kernel,
            stride,
            dilation,
            pad,
            groups,
            has_bias,
            bn: None,
            residual: false,
            act: Act::None,
        };
        self.add_op(kind, args, span, &[arg1], Some(decl))
    }

    fn dense(&mut self, span: Span, a: &mut Args) -> Option<ValueId> {
        let arg1 = a.positional_spans().first().copied().unwrap_or(span);
        let x = self.inputs::<1>(a, span)?[0];
        let (pname, pty) = a.param(self, "weights, like `fc: weights<256 -> 10>`")?;
        let has_bias = a.bool(self, "bias", true)?;
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
        if c_out.value == 0 || c_in.value == 0 {
            let n = if c_out.value == 0 { c_out } else { c_in };
            self.error(n.span, "dense: sizes must be at least 1");
            return None;
        }
        let w = self.param(pname, pty, "weight", vec![c_out.value, c_in.value])?;
        let mut args = vec![x, w];
        if has_bias {
            args.push(self.param(pname, pty, "bias", vec![c_out.value])?);
        }
        let decl = self.spans.at(c_in.span);
        self.add_op(
            OpKind::Dense {
                has_bias,
                bn: None,
                act: Act::None,
            },
            args,
            span,
            &[arg1],
            Some(decl),
        )
    }

    fn norm_params(
        &mut self,
        pname: &ParamName,
        pty: &ParamType,
        c: usize,
    ) -> Option<[ValueId; 4]> {
        if c == 0 {
            self.error(pty.span(), "batch_norm: sizes must be at least 1");
            return None;
        }
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
    ) -> Option<ValueId> {
        let key = format!("{}.{part}", name.key);
        let shape = Shape::tensor(DType::F32, shape);
        self.declare_param(key, name, ty.span(), ty.end(), shape)
    }

    /// Declares the tensor `key` of `shape`; a key used twice is an error.
    fn declare_param(
        &mut self,
        key: String,
        name: &ParamName,
        ty_start: Span,
        ty_end: Span,
        shape: Shape,
    ) -> Option<ValueId> {
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
        let name_loc = self.spans.at(name.span);
        let ty_loc = self.spans.range(ty_start, ty_end);
        Some(self.graph.add_param(key, shape, name_loc, ty_loc))
    }

    /// `split(x, axis = 1, sizes = [8, 8])`: several results.
    fn split(&mut self, span: Span, a: &mut Args) -> Option<Vec<ValueId>> {
        let arg1 = a.positional_spans().first().copied().unwrap_or(span);
        let x = self.inputs::<1>(a, span)?[0];
        let axis = a.int(self, "axis")?.unwrap_or(0);
        let decl = a.named_span("sizes").map(|s| self.spans.at(s));
        if a.named_is_expr("sizes") {
            let at = a.named_span("sizes").unwrap_or(span);
            let s = a.named_expr("sizes")?;
            let s = self.expr(&s)?;
            let parts = self.results_wanted.take().unwrap_or(1);
            let loc = self.spans.at(span);
            let arg_locs = vec![self.spans.at(arg1), self.spans.at(at)];
            let kind = OpKind::SplitDyn { axis, parts };
            return Some(
                self.graph
                    .add_op(kind, vec![x, s], parts, loc, arg_locs, decl),
            );
        }
        let Some(sizes) = a.list(self, "sizes")? else {
            self.error(
                span,
                "split: expected the sizes, like `split(x, axis = 1, sizes = [8, 8])`",
            );
            return None;
        };
        let Some(sizes) = sizes
            .iter()
            .map(|&s| usize::try_from(s).ok())
            .collect::<Option<Vec<_>>>()
        else {
            self.error(span, "split: sizes must not be negative");
            return None;
        };
        if sizes.is_empty() {
            self.error(span, "split: needs at least one size");
            return None;
        }
        let loc = self.spans.at(span);
        let arg_loc = self.spans.at(arg1);
        let n = sizes.len();
        Some(self.graph.add_op(
            OpKind::Split { axis, sizes },
            vec![x],
            n,
            loc,
            vec![arg_loc],
            decl,
        ))
    }

    /// A sequence input `s: seq<tensor<...>, N>`: `N` tensor inputs (`s.0`, `s.1`, ...; the
    /// caller passes one `kiln::Seq`) and a `seq_construct` of them, bound to `s`. Without `N`,
    /// a run-time sequence of any length (`run_seq_input`).
    fn seq_input(&mut self, input: &crate::syntax::InputDecl) {
        let name = input.name.to_string();
        let Some(n) = input.ty.seq_len else {
            self.run_seq_input(input);
            return;
        };
        if n.value == 0 || n.value > 4096 {
            self.error(
                n.span,
                format!("input `{name}`: a sequence input has 1 to 4096 elements"),
            );
            self.scope.insert(name, None);
            return;
        }
        self.seq_type_ok = true;
        let ty = self.declared_type(&input.ty, None);
        self.seq_type_ok = false;
        let Some(ty) = ty else {
            self.scope.insert(name, None);
            return;
        };
        if ty.dims.contains(&Dim::Any) {
            self.error(
                input.ty.span,
                format!("input `{name}`: `?` sizes are for outputs only"),
            );
            self.scope.insert(name, None);
            return;
        }
        let loc = self.spans.at(input.name.span());
        let ty_loc = self.spans.at(input.ty.span);
        let mut elems = Vec::with_capacity(n.value);
        for k in 0..n.value {
            let i = self.graph.inputs.len();
            let v = self.graph.add_value(Producer::Input(i), loc);
            self.graph.values[v.index()].name = Some(format!("{name}.{k}"));
            self.graph.inputs.push(Input {
                name: format!("{name}.{k}"),
                value: v,
                ty: ty.clone(),
                loc: ty_loc,
            });
            elems.push(v);
        }
        let s = self
            .graph
            .add_op(OpKind::SeqConstruct, elems, 1, loc, vec![], None)[0];
        self.graph.values[s.index()].name = Some(name.clone());
        if self.scope.insert(name.clone(), Some(s)).is_some() {
            self.error(
                input.name.span(),
                format!("input `{name}` is declared twice"),
            );
        }
    }

    /// A sequence input without a length, `s: seq<tensor<f32[?,4]>>`: the caller passes any
    /// number of tensors (`kiln::AsSeq`), copied at run time into a run-time sequence; `?` is a
    /// size each element may have its own of.
    fn run_seq_input(&mut self, input: &crate::syntax::InputDecl) {
        let name = input.name.to_string();
        self.seq_type_ok = true;
        let ty = self.declared_type(&input.ty, None);
        self.seq_type_ok = false;
        let Some(ty) = ty else {
            self.scope.insert(name, None);
            return;
        };
        let mut dims = Vec::with_capacity(ty.dims.len());
        for d in &ty.dims {
            match d {
                Dim::Known(n) => dims.push(Some(*n)),
                Dim::Any => dims.push(None),
                Dim::Sym(_) => {
                    self.error(input.ty.span, format!("input `{name}`: a sequence input without a length takes `?` for sizes that vary between its elements, not size symbols"));
                    self.scope.insert(name, None);
                    return;
                }
            }
        }
        let slot = self.run_seqs;
        self.run_seqs += 1;
        let loc = self.spans.at(input.name.span());
        let kind = OpKind::SeqInput {
            slot,
            name: name.clone(),
            dtype: ty.dtype,
            dims,
        };
        let s = self.graph.add_op(kind, vec![], 1, loc, vec![], None)[0];
        self.graph.values[s.index()].name = Some(name.clone());
        if self.scope.insert(name.clone(), Some(s)).is_some() {
            self.error(
                input.name.span(),
                format!("input `{name}` is declared twice"),
            );
        }
    }

    /// The sequence ops (ONNX's eight). A position is a whole number (checked at compile time by
    /// inference, at the number's token) or an `i64` scalar value (checked at run time).
    fn seq_op(&mut self, name: &str, span: Span, a: &mut Args) -> Option<ValueId> {
        let spans = a.positional_spans().to_vec();
        match name {
            "seq_empty" => {
                let dtype = match a.take_positional() {
                    Some(Value::Expr(Expr::Name(n))) => DType::from_name(&n.to_string()),
                    None => Some(DType::F32),
                    _ => None,
                };
                let Some(dtype) = dtype else {
                    self.error(
                        span,
                        "seq_empty: expected the element dtype, like `seq_empty(f32)`",
                    );
                    return None;
                };
                self.add_op(OpKind::SeqEmpty(dtype), vec![], span, &[], None)
            }
            "seq_construct" => {
                let xs = self.variadic_inputs(a)?;
                if xs.is_empty() {
                    self.error(span, "seq_construct: needs at least one tensor (use `seq_empty(dtype)` for none)");
                    return None;
                }
                self.add_op(OpKind::SeqConstruct, xs, span, &spans, None)
            }
            "insert" => {
                let [s, x] = self.inputs::<2>(a, span)?;
                let (at, pos) = self.position(a)?;
                let mut args = vec![s, x];
                args.extend(pos);
                self.add_op(OpKind::SeqInsert { at }, args, span, &spans, None)
            }
            "erase" | "at" => {
                let s = self.inputs::<1>(a, span)?[0];
                let (at, pos) = self.position(a)?;
                if name == "at" && at == Pos::Default {
                    self.error(
                        span,
                        "at: expected the position, like `at(s, 0)` or `at(s, -1)`",
                    );
                    return None;
                }
                let mut args = vec![s];
                args.extend(pos);
                let kind = if name == "at" {
                    OpKind::SeqAt { at }
                } else {
                    OpKind::SeqErase { at }
                };
                self.add_op(kind, args, span, &spans, None)
            }
            "len" => {
                let s = self.inputs::<1>(a, span)?[0];
                self.add_op(OpKind::SeqLen, vec![s], span, &spans, None)
            }
            "split_to_seq" => {
                let x = self.inputs::<1>(a, span)?[0];
                let axis = a.int(self, "axis")?.unwrap_or(0);
                let keepdims = a.bool(self, "keepdims", true)?;
                let decl = a.peek_positional(0).map(|v| self.spans.at(v.span()));
                let mut args = vec![x];
                let split = match a.take_positional() {
                    None => SeqSplit::Ones,
                    Some(Value::Expr(e)) => {
                        args.push(self.expr(&e)?);
                        SeqSplit::Run
                    }
                    Some(Value::Int(n)) if n.value > 0 => SeqSplit::Chunk(n.value),
                    Some(Value::List(items, at)) => {
                        match items.iter().map(|&s| usize::try_from(s).ok()).collect() {
                            Some(sizes) => SeqSplit::Sizes(sizes),
                            None => {
                                self.error(at, "split_to_seq: sizes must not be negative");
                                return None;
                            }
                        }
                    }
                    Some(other) => {
                        self.error(other.span(), "split_to_seq: expected a chunk size (a positive number) or the sizes, like `[2, 1]`");
                        return None;
                    }
                };
                let kind = OpKind::SplitToSeq {
                    axis,
                    split,
                    keepdims,
                };
                self.add_op(kind, args, span, &spans, decl)
            }
            _ => {
                let s = self.inputs::<1>(a, span)?[0];
                let axis = a.int(self, "axis")?.unwrap_or(0);
                let new_axis = a.bool(self, "new_axis", false)?;
                let kind = OpKind::ConcatFromSeq { axis, new_axis };
                self.add_op(kind, vec![s], span, &spans, None)
            }
        }
    }

    /// The optional position argument of `insert`, `erase` and `at`: absent, a whole number,
    /// or a value (an `i64` scalar, given at run time).
    fn position(&mut self, a: &mut Args) -> Option<(Pos, Option<ValueId>)> {
        match a.take_positional() {
            None => Some((Pos::Default, None)),
            Some(Value::Int(n)) => match i64::try_from(n.value) {
                Ok(i) => Some((Pos::Static(i), None)),
                Err(_) => {
                    self.error(
                        n.span,
                        format!("{}: position {} is too large", a.op, n.value),
                    );
                    None
                }
            },
            Some(Value::Float(f, _)) if f.fract() == 0.0 && f.abs() < 1e15 => {
                Some((Pos::Static(f as i64), None))
            }
            Some(Value::Expr(e)) => {
                let v = self.expr(&e)?;
                Some((Pos::Run, Some(v)))
            }
            Some(other) => {
                self.error(
                    other.span(),
                    format!("{}: a position is a whole number or an i64 scalar", a.op),
                );
                None
            }
        }
    }

    /// The two operands of arithmetic: tensors, or numbers (which become scalar constants).
    fn operands(&mut self, a: &mut Args, span: Span) -> Option<[ValueId; 2]> {
        self.positional_values(a, span, true)
    }

    fn inputs<const N: usize>(&mut self, a: &mut Args, span: Span) -> Option<[ValueId; N]> {
        self.positional_values(a, span, false)
    }

    /// The first `N` positional arguments as values: tensors, and with `numbers` also number
    /// literals (which become scalar constants).
    fn positional_values<const N: usize>(
        &mut self,
        a: &mut Args,
        span: Span,
        numbers: bool,
    ) -> Option<[ValueId; N]> {
        let mut out = Vec::new();
        let mut poisoned = false;
        for i in 0..N {
            let constant = match a.take_positional() {
                Some(Value::Expr(e)) => {
                    match self.expr(&e) {
                        Some(v) => out.push(v),
                        None => poisoned = true,
                    }
                    continue;
                }
                Some(Value::Float(f, s)) if numbers => (f as f32, s),
                Some(Value::Int(n)) if numbers => (n.value as f32, n.span),
                Some(other) => {
                    let what = if numbers {
                        "a tensor or a number"
                    } else {
                        "a tensor"
                    };
                    self.error(
                        other.span(),
                        format!("{}: argument {} must be {what}", a.op, i + 1),
                    );
                    poisoned = true;
                    continue;
                }
                None => {
                    self.error(span, format!("{}: missing input {} of {N}", a.op, i + 1));
                    return None;
                }
            };
            out.push(self.add_op(OpKind::Constant(constant.0), vec![], constant.1, &[], None)?);
        }
        if poisoned {
            return None;
        }
        out.try_into().ok()
    }

    fn variadic_inputs(&mut self, a: &mut Args) -> Option<Vec<ValueId>> {
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
