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

use crate::contract::{conv2d_scratch, conv3d_scratch, conv_algo, conv_transpose_scratch};
use crate::diag::{plural, Errors, Loc};
use crate::ir::{
    as_2d, pad_2d, BinOp, Graph, Kind, Op, OpKind, Padding, PoolKind, Producer, ReshapeTo, SeqVal,
    Shape, ValueId,
};

mod seq;
pub use seq::MAX_SEQ_LEN;

/// The most bytes a network's tensors may take all together: inputs, every op's result and
/// scratch, and the parameters, each rounded up to the planner's 64-byte alignment as if nothing
/// were reused. Keeping the sum (not just each tensor) under this bound, a quarter of what a Rust
/// allocation may hold, means no size, offset or total computed from the shapes later (plan,
/// parameter layout, generated constants, the kernels' own formulas) can overflow: they are all
/// at most a few times this sum.
pub const MAX_BYTES: usize = isize::MAX as usize / 4;

/// Types `g` for one binding of its size symbols (`binding[i]` is the value of `SymId(i)`; empty
/// for a graph without symbols). Returns the typed graph, or `None` after reporting every error
/// to `errors`.
pub fn infer(g: &Graph, binding: &[usize], errors: &mut Errors) -> Option<Graph> {
    let mut cx = Infer {
        g,
        binding,
        runs: 0,
        types: vec![None; g.values.len()],
        seqs: vec![None; g.values.len()],
        errors,
        bytes: 0,
    };
    let before = cx.errors.len();
    for input in &g.inputs {
        // A symbol without a value was reported by the front end.
        let Some(shape) = input.ty.bind(binding) else {
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
        if op.kind.is_seq() {
            let (kind, shape, seq) = match cx.seq_op(op) {
                Some((kind, shape, seq)) => (kind, Some(shape), seq),
                None => (op.kind.clone(), None, None),
            };
            cx.types[op.result().index()] = shape;
            cx.seqs[op.result().index()] = seq;
            resolved.push(kind);
            continue;
        }
        let (kind, shapes) = match cx.op(op) {
            Some((kind, shapes)) if cx.empty_ok(op, &shapes) => {
                (kind, shapes.into_iter().map(Some).collect())
            }
            _ => (op.kind.clone(), vec![None; op.results.len()]),
        };
        for (r, s) in op.results.iter().zip(shapes) {
            cx.types[r.index()] = s;
        }
        resolved.push(kind);
    }
    for o in &g.outputs {
        let Some(actual) = cx.types[o.value.index()].clone() else {
            continue;
        };
        if let Some(s) = &cx.seqs[o.value.index()] {
            if !o.seq {
                let msg = format!("this output is a sequence ({}); declare it `seq<...>`, or return its elements with `at(s, i)` or `concat_from_seq`", s.type_text());
                cx.error(o.ty_loc, msg);
            } else if let Some(msg) = seq_output_mismatch(&o.ty, s, binding) {
                cx.error(o.ty_loc, msg);
            }
            continue;
        }
        if o.seq {
            let msg = format!("output type is a sequence but the network computes {actual}; make one with `seq_construct(...)`");
            cx.error(o.ty_loc, msg);
            continue;
        }
        // `?` in the declared type stands for a size known only at run time.
        let declared: Vec<Option<usize>> =
            o.ty.dims
                .iter()
                .map(|d| match d {
                    crate::ir::Dim::Known(n) => Some(Some(*n)),
                    crate::ir::Dim::Sym(s) => binding.get(s.index()).map(|&v| Some(v)),
                    crate::ir::Dim::Any => Some(None),
                })
                .collect::<Option<_>>()
                .unwrap_or_default();
        let fits = declared.len() == actual.rank()
            && o.ty.dtype == actual.dtype
            && declared.iter().enumerate().all(|(i, d)| match d {
                Some(n) => actual.run_dim(i).is_none() && actual.dims[i] == *n,
                None => actual.run_dim(i).is_some(),
            });
        if !fits {
            let shown = match o.ty.bind(binding) {
                Some(s) => s.to_string(),
                None => format!(
                    "tensor<{}[{}]>",
                    o.ty.dtype,
                    declared
                        .iter()
                        .map(|d| d.map_or("?".to_string(), |n| n.to_string()))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            };
            cx.error(
                o.ty_loc,
                format!("output type is {shown} but the network computes {actual}"),
            );
        }
    }
    if cx.errors.len() > before {
        return None;
    }
    let mut typed = g.clone();
    typed.seqs = cx.seqs;
    // A value can stay untyped without an error of this pass only when the front end reported
    // one (an input whose size has no value); the pipeline stops on those errors.
    typed.types = cx.types.into_iter().collect::<Option<Vec<_>>>()?;
    for (op, kind) in typed.ops.iter_mut().zip(resolved) {
        op.kind = kind;
    }
    // An output must live in the arena, which the caller borrows it from: an output that is an
    // input's own bytes (or a view of them, which only the resolved graph knows: a reshape, a
    // squeeze, a transpose that moves nothing) gets copied there.
    for i in 0..typed.outputs.len() {
        let (v, at) = (typed.outputs[i].value, typed.outputs[i].ty_loc);
        if typed.outputs[i].seq {
            typed.outputs[i].value = seq_output(&mut typed, v, at);
            continue;
        }
        if typed.is_external(v) {
            let shape = typed.shape(v).clone();
            let copy = typed.add_op(OpKind::Copy, vec![v], 1, at, vec![at], None)[0];
            typed.types.push(shape);
            typed.seqs.push(None);
            typed.outputs[i].value = copy;
        }
    }
    Some(typed)
}

/// Why a returned sequence does not have its declared type, if it does not: the element dtype,
/// each declared size against the element super type's (`?` matches anything), and the order
/// must be known at compile time.
fn seq_output_mismatch(
    ty: &crate::ir::TensorType,
    s: &SeqVal,
    binding: &[usize],
) -> Option<String> {
    if s.run_order {
        return Some(format!("this output is a sequence whose order is decided at run time ({}); a returned sequence needs it at compile time", s.type_text()));
    }
    // A run-time sequence is returned as it is (`kiln::RunSeq`), with its element type.
    let sup = s.run.clone().or_else(|| s.super_dims());
    let fits = ty.dtype == s.dtype
        && match &sup {
            None => s.elems.is_empty(),
            Some(d) => {
                d.len() == ty.dims.len()
                    && ty.dims.iter().zip(d).all(|(want, got)| match want {
                        crate::ir::Dim::Any => true,
                        crate::ir::Dim::Known(n) => *got == Some(*n),
                        crate::ir::Dim::Sym(k) => binding.get(k.index()).copied() == *got,
                    })
            }
        };
    (!fits).then(|| {
        let dims: Vec<String> = ty
            .dims
            .iter()
            .map(|d| match d {
                crate::ir::Dim::Known(n) => n.to_string(),
                _ => "?".to_string(),
            })
            .collect();
        format!(
            "output type is seq<tensor<{}[{}]>> but the network computes {}",
            ty.dtype,
            dims.join(","),
            s.type_text()
        )
    })
}

/// A returned sequence as a fresh `seq_construct` of whole tensors in the arena (the caller
/// borrows them): each element is taken with `at` (a view) and copied when it is an input's
/// bytes. Returns the new output value.
fn seq_output(g: &mut Graph, v: ValueId, at: Loc) -> ValueId {
    let Some(s) = g.seq(v).cloned().filter(|s| !s.elems.is_empty()) else {
        return v;
    };
    let mut elems = Vec::with_capacity(s.len);
    for (j, e) in s.elems.iter().enumerate() {
        let kind = OpKind::SeqAt {
            at: crate::ir::Pos::Static(j as i64),
        };
        let mut x = g.add_op(kind, vec![v], 1, at, vec![at], None)[0];
        g.types.push(e.shape.clone());
        g.seqs.push(None);
        if g.is_external(x) {
            x = g.add_op(OpKind::Copy, vec![x], 1, at, vec![at], None)[0];
            g.types.push(e.shape.clone());
            g.seqs.push(None);
        }
        elems.push(crate::ir::Elem {
            base: x,
            offset: 0,
            shape: e.shape.clone(),
        });
    }
    let args = elems.iter().map(|e| e.base).collect();
    let out = g.add_op(OpKind::SeqConstruct, args, 1, at, vec![], None)[0];
    g.types.push(Shape::tensor(s.dtype, vec![]));
    g.seqs.push(Some(SeqVal { elems, ..s }));
    out
}

struct Infer<'a, 'e> {
    g: &'a Graph,
    binding: &'a [usize],
    /// Run-time size variables handed out so far.
    runs: u32,
    types: Vec<Option<Shape>>,
    /// Per value: the sequence it is, if it is one.
    seqs: Vec<Option<SeqVal>>,
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

    /// Zero-size tensors: an op whose result has no elements computes nothing (codegen emits
    /// no kernel call for it), so any rule that typed it is fine. An op that would compute a
    /// result *with* elements from an input without any (a reduction over an empty axis, a
    /// product over an inner size of 0, a pad of nothing) is refused here, at the input: what
    /// a maximum, mean or padding of no elements should give is not defined for kiln's ops
    /// yet. Only `concat` (which skips empty parts) takes them.
    fn empty_ok(&mut self, op: &Op, results: &[Shape]) -> bool {
        let has_elements = |s: &Shape| !s.is_dynamic() && s.elements() > 0;
        // Views are not counted against the budget; an empty one could still have sizes
        // whose products overflow (`reshape` of `[0, 4]` to `[0, 2^62]`).
        if let Some(s) = results.iter().find(|s| reserved_bytes(s).is_none()) {
            let name = op.kind.name();
            self.error(op.loc, format!("{name}: the result {s} is too large: a tensor may take at most {MAX_BYTES} bytes"));
            return false;
        }
        if matches!(op.kind, OpKind::Concat { .. }) || !results.iter().any(has_elements) {
            return true;
        }
        let empty = op.args.iter().enumerate().find_map(|(i, &a)| {
            let s = self.types[a.index()].as_ref()?;
            (self.seqs[a.index()].is_none() && !s.is_dynamic() && s.elements() == 0)
                .then(|| (i, s.clone()))
        });
        let Some((i, s)) = empty else {
            return true;
        };
        let name = op.kind.name();
        let out = results
            .iter()
            .find(|s| has_elements(s))
            .cloned()
            .unwrap_or(s.clone());
        self.error(op.arg_loc(i), format!("{name}: {s} has no elements, but the result {out} would have some; kiln runs {name} on an empty tensor only when its result is empty too"));
        false
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
        if let Some(i) = op.args.iter().position(|a| self.seqs[a.index()].is_some()) {
            let s = self.seqs[op.args[i].index()]
                .as_ref()
                .map(SeqVal::type_text);
            let msg = format!("{name}: this argument is a sequence ({}), not a tensor; take an element with `at(s, i)` or join them with `concat_from_seq`", s.unwrap_or_default());
            self.error(op.arg_loc(i), msg);
            return None;
        }
        if let OpKind::Constant(_) = op.kind {
            let out = Shape::tensor(crate::ir::DType::F32, vec![]);
            self.claim(op.loc, format_args!("{name}: the output {out}"), &out)?;
            return Some((op.kind.clone(), vec![out]));
        }
        let x = &args[0];
        let decl = op.decl.unwrap_or(op.loc);
        let mut kind = op.kind.clone();
        self.dtypes(op, &args)?;
        if let Some(d) = args.iter().position(Shape::is_dynamic) {
            if !dynamic_ok(&op.kind) {
                self.error(op.arg_loc(d), format!("{name}: {} has a size known only at run time, and {name} needs static sizes; on run-time sizes kiln supports elementwise ops, arithmetic, comparisons, cast, reductions, reshape with one -1 and gather", args[d]));
                return None;
            }
        }
        let out = match &mut kind {
            OpKind::Conv {
                c_in,
                kernel,
                stride,
                dilation,
                pad,
                groups,
                ..
            } => {
                let n = self.spatial_rank(x, name, op.loc)?;
                if n != kernel.len() {
                    let at = match self.g.values[op.args[1].index()].producer {
                        Producer::Param(p) => self.g.params[p.index()].ty_loc,
                        _ => decl,
                    };
                    self.error(
                        at,
                        format!(
                            "{name}: weights `{}` have a {}-D kernel {} but input {x} has {} (a {n}-D convolution takes a kernel like `{}xf32`)",
                            self.layer(op.args[1]),
                            kernel.len(),
                            join(kernel),
                            plural(n, "spatial dimension"),
                            join(&vec![3; n])
                        ),
                    );
                    return None;
                }
                if *c_in != x.channels() {
                    self.error(
                        decl,
                        format!(
                            "{name}: input {x} has {} but weights `{}` expect {}",
                            plural(x.channels(), "channel"),
                            self.layer(op.args[1]),
                            c_in
                        ),
                    );
                    return None;
                }
                let (p, out) = self.window(name, op.loc, x, kernel, stride, dilation, pad)?;
                let c_out = args[1].dims[0];
                let ci = *c_in / *groups;
                let scratch = if n == 3 {
                    conv3d_scratch(
                        to3(kernel),
                        to3(stride),
                        p.clone().try_into().expect("3-D padding has 6 sides"),
                        ci,
                        to3(&out),
                    )
                } else {
                    let geom = (as_2d(kernel, 1), as_2d(stride, 1), as_2d(dilation, 1));
                    let (pad, out) = (pad_2d(&p), as_2d(&out, 1));
                    let algo = conv_algo(geom.0, geom.1, geom.2, pad, *groups, *c_in, c_out, out);
                    conv2d_scratch(
                        algo, geom.0, geom.1, geom.2, pad, *groups, *c_in, c_out, out,
                    )
                };
                *pad = Padding::Explicit(p);
                let Some(scratch) = scratch else {
                    self.error(op.loc, format!("{name}: the scratch buffer is too large: a network's tensors may take at most {MAX_BYTES} bytes in all"));
                    return None;
                };
                if scratch > 0 {
                    let s = Shape::tensor(crate::ir::DType::F32, vec![scratch]);
                    self.claim(
                        op.loc,
                        format_args!("{name}: the scratch buffer of {scratch} floats"),
                        &s,
                    )?;
                }
                window_output(x, c_out, &out)
            }
            OpKind::ConvTranspose {
                c_in,
                kernel,
                stride,
                dilation,
                pad,
                output_padding,
                groups,
                has_bias,
            } => {
                let n = self.spatial_rank(x, name, op.loc)?;
                let w = &args[1];
                if n != kernel.len() || w.rank() != n + 2 || w.dims[2..] != kernel[..] {
                    self.error(
                        decl,
                        format!(
                            "{name}: weights `{}` are {w} but input {x} has {} and the kernel is {} (the weights of a transposed convolution are `[c_in, c_out / groups, k...]`)",
                            self.layer(op.args[1]),
                            plural(n, "spatial dimension"),
                            join(kernel)
                        ),
                    );
                    return None;
                }
                if *c_in != x.channels() || w.dims[0] != *c_in {
                    self.error(
                        decl,
                        format!(
                            "{name}: input {x} has {} but weights `{}` expect {}",
                            plural(x.channels(), "channel"),
                            self.layer(op.args[1]),
                            w.dims[0]
                        ),
                    );
                    return None;
                }
                let c_out = w.dims[1] * *groups;
                if *has_bias && args[2].dims != [c_out] {
                    self.error(
                        decl,
                        format!(
                            "{name}: the bias is {} but the output has {}",
                            args[2],
                            plural(c_out, "channel")
                        ),
                    );
                    return None;
                }
                let p = match pad {
                    Padding::Explicit(p) => Some(p.clone()),
                    Padding::Written(w) => Padding::expand(w, n),
                    Padding::Same => None,
                };
                let Some(p) = p else {
                    self.error(op.loc, format!("{name}: give the padding as numbers (what is cut from each end of the output): one, one per spatial dimension ({n}) or a begin and an end for each ({})", 2 * n));
                    return None;
                };
                *pad = Padding::Explicit(p.clone());
                let sizes = x.spatial_dims().to_vec();
                let mut out = Vec::with_capacity(n);
                for d in 0..n {
                    let (s, k, dil, op_) = (stride[d], kernel[d], dilation[d], output_padding[d]);
                    if s == 0 || k == 0 || dil == 0 {
                        self.error(
                            op.loc,
                            format!("{name}: kernel, stride and dilation must be at least 1"),
                        );
                        return None;
                    }
                    // ONNX: output_padding must be below the stride or the dilation.
                    if op_ >= s.max(dil) {
                        self.error(op.loc, format!("{name}: output_padding {} must be smaller than the stride or the dilation", join(output_padding)));
                        return None;
                    }
                    let full = sizes[d]
                        .checked_sub(1)
                        .and_then(|v| v.checked_mul(s))
                        .and_then(|v| v.checked_add((k - 1).checked_mul(dil)?))
                        .and_then(|v| v.checked_add(op_)?.checked_add(1));
                    let cut = p[d].checked_add(p[d + n]);
                    match (full, cut) {
                        (Some(f), Some(c)) if f > c => out.push(f - c),
                        _ => {
                            self.error(op.loc, format!("{name}: padding {p:?} leaves no output of input {x} (kernel {}, stride {})", join(kernel), join(stride)));
                            return None;
                        }
                    }
                }
                let vol = sizes.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
                let taps = kernel.iter().try_fold(1usize, |a, &b| a.checked_mul(b));
                let scratch = vol.zip(taps).and_then(|(v, t)| {
                    conv_transpose_scratch(v, *c_in / *groups, c_out / *groups, t)
                });
                let Some(scratch) = scratch else {
                    self.error(op.loc, format!("{name}: the scratch buffer is too large: a network's tensors may take at most {MAX_BYTES} bytes in all"));
                    return None;
                };
                let s = Shape::tensor(crate::ir::DType::F32, vec![scratch]);
                self.claim(
                    op.loc,
                    format_args!("{name}: the scratch buffer of {scratch} floats"),
                    &s,
                )?;
                window_output(x, c_out, &out)
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
            OpKind::Unary(_) | OpKind::Copy | OpKind::Math(_) => x.clone(),
            OpKind::Compare(c) => {
                let y = &args[1];
                let Some(mut shape) = self.broadcast_runs(x, y) else {
                    self.error(op.loc, format!("{}: cannot broadcast {x} with {y}: each size must match or be 1 (a run-time size only matches itself or 1)", c.name()));
                    return None;
                };
                shape.dtype = crate::ir::DType::Bool;
                shape
            }
            OpKind::Pow => {
                let y = &args[1];
                if y.dtype != crate::ir::DType::F32 {
                    self.error(
                        op.arg_loc(1),
                        format!("pow: the exponent is {y}; kiln computes pow in f32 (use `cast`)"),
                    );
                    return None;
                }
                let Some(shape) = self.broadcast_runs(x, y) else {
                    self.error(
                        op.loc,
                        format!("pow: cannot broadcast {x} with {y}: each size must match or be 1"),
                    );
                    return None;
                };
                shape
            }
            OpKind::Range => {
                for (i, b) in args.iter().enumerate() {
                    let numeric = matches!(
                        b.dtype,
                        crate::ir::DType::F32
                            | crate::ir::DType::F64
                            | crate::ir::DType::I64
                            | crate::ir::DType::I32
                    );
                    if b.rank() != 0 || b.dtype != x.dtype || !numeric {
                        self.error(op.arg_loc(i), format!("range: start, limit and delta are scalars of one numeric dtype, like `tensor<i64[]>`; argument {} is {b}", i + 1));
                        return None;
                    }
                }
                // No bound: the count is whatever the values say.
                let k = self.new_run();
                let mut out = Shape::tensor(x.dtype, vec![0]);
                out.run = vec![Some(k)];
                out
            }
            OpKind::NonZero => {
                let n = x.elements();
                let k = self.new_run();
                let mut out = Shape::tensor(crate::ir::DType::I64, vec![x.rank().max(1), n]);
                out.run = vec![None, Some(k)];
                out
            }
            OpKind::SliceDyn { axes } => {
                for (i, what) in [(1, "starts"), (2, "ends")] {
                    let b = &args[i];
                    if b.dtype != crate::ir::DType::I64 || b.dims != [axes.len()] {
                        self.error(op.arg_loc(i), format!("slice: `{what}` is {b}; with `axes = {axes:?}` it must be tensor<i64[{}]>", axes.len()));
                        return None;
                    }
                }
                let mut out = Shape::tensor(x.dtype, x.dims.clone());
                out.run = vec![None; x.rank()];
                let mut norm = Vec::new();
                for &a in axes.iter() {
                    let a = self.axis(a, x, name, decl)?;
                    if norm.contains(&a) {
                        self.error(decl, format!("slice: axis {a} is given twice"));
                        return None;
                    }
                    norm.push(a);
                    out.run[a] = Some(self.new_run());
                }
                *axes = norm.iter().map(|&a| a as i64).collect();
                out
            }
            OpKind::Constant(_) => unreachable!("constants return above"),
            OpKind::Softmax { axis, .. } => {
                let default = if x.kind == Kind::Tensor || x.rank() < 2 {
                    -1
                } else {
                    1
                };
                *axis = Some(self.axis(axis.unwrap_or(default), x, name, decl)? as i64);
                x.clone()
            }
            OpKind::Transpose { perm } => {
                let mut seen = vec![false; x.rank()];
                let ok = perm.len() == x.rank()
                    && perm
                        .iter()
                        .all(|&p| p < x.rank() && !std::mem::replace(&mut seen[p], true));
                if !ok {
                    self.error(
                        decl,
                        format!(
                            "transpose: {perm:?} is not a permutation of the {} axes of {x}",
                            x.rank()
                        ),
                    );
                    return None;
                }
                let dims: Vec<usize> = perm.iter().map(|&p| x.dims[p]).collect();
                let out = Shape::tensor(x.dtype, dims);
                // A transpose that keeps the order of every axis larger than 1 moves no bytes:
                // it is a reshape, an alias.
                let moved: Vec<usize> = perm.iter().copied().filter(|&p| x.dims[p] != 1).collect();
                if moved.windows(2).all(|w| w[0] < w[1]) {
                    let dims = out.dims.iter().map(|&d| d as i64).collect();
                    return Some((OpKind::Reshape(ReshapeTo::Dims(dims)), vec![out]));
                }
                out
            }
            OpKind::MatMul => {
                let y = &args[1];
                if x.rank() < 2 || y.rank() < 2 || x.dtype != y.dtype {
                    self.error(op.loc, format!("matmul: {x} times {y}: both operands need the same dtype and at least 2 dimensions"));
                    return None;
                }
                let (m, k) = (x.dims[x.rank() - 2], x.dims[x.rank() - 1]);
                let (k2, n) = (y.dims[y.rank() - 2], y.dims[y.rank() - 1]);
                if k != k2 {
                    self.error(
                        op.loc,
                        format!("matmul: {x} times {y}: the inner sizes {k} and {k2} differ"),
                    );
                    return None;
                }
                let bx = Shape::tensor(x.dtype, x.dims[..x.rank() - 2].to_vec());
                let by = Shape::tensor(y.dtype, y.dims[..y.rank() - 2].to_vec());
                let Some(batch) = broadcast(&bx, &by) else {
                    self.error(
                        op.loc,
                        format!("matmul: {x} times {y}: the batch sizes do not broadcast"),
                    );
                    return None;
                };
                let mut dims = batch.dims;
                dims.extend([m, n]);
                Shape::tensor(x.dtype, dims)
            }
            OpKind::Reduce { axes, keepdims, .. } => {
                let mut norm = Vec::new();
                for &a in axes.iter() {
                    norm.push(self.axis(a, x, name, decl)?);
                }
                norm.sort_unstable();
                norm.dedup();
                // The kernel reduces one block of adjacent axes; axes of size 1 cost nothing.
                let big: Vec<usize> = norm
                    .iter()
                    .copied()
                    .filter(|&a| x.dims[a] != 1 || x.run_dim(a).is_some())
                    .collect();
                if big.windows(2).any(|w| w[1] != w[0] + 1) {
                    self.error(decl, format!("{name}: reducing {x} over the non-adjacent axes {big:?} is not supported yet; reduce one block of adjacent axes at a time"));
                    return None;
                }
                let mut dims = Vec::new();
                for (i, &d) in x.dims.iter().enumerate() {
                    if !norm.contains(&i) {
                        dims.push(d);
                    } else if *keepdims {
                        dims.push(1);
                    }
                }
                *axes = norm.iter().map(|&a| a as i64).collect();
                let kind = if *keepdims { x.kind } else { Kind::Tensor };
                let mut out = Shape::new(x.dtype, dims, kind);
                if x.is_dynamic() {
                    out.run = (0..x.rank())
                        .filter(|i| !norm.contains(i) || *keepdims)
                        .map(|i| {
                            if norm.contains(&i) {
                                None
                            } else {
                                x.run_dim(i)
                            }
                        })
                        .collect();
                }
                out
            }
            OpKind::Cast(to) => {
                let k = if *to == crate::ir::DType::F32 {
                    x.kind
                } else {
                    Kind::Tensor
                };
                let mut out = Shape::new(*to, x.dims.clone(), k);
                out.run = x.run.clone();
                out
            }
            OpKind::Gather { axis, indices } => {
                if x.is_dynamic() {
                    self.error(op.arg_loc(0), format!("gather: the data {x} has a size known only at run time; only the indices may"));
                    return None;
                }
                let a = self.axis(*axis, x, name, decl)?;
                *axis = a as i64;
                let len = x.dims[a];
                let idx_dims = match indices {
                    Some(list) => {
                        if let Some(bad) =
                            list.iter().find(|&&i| i < -(len as i64) || i >= len as i64)
                        {
                            self.error(decl, format!("gather: index {bad} is out of range for axis {a} of {x}, which has size {len}"));
                            return None;
                        }
                        vec![list.len()]
                    }
                    None => {
                        let idx = &args[1];
                        if !matches!(idx.dtype, crate::ir::DType::I64 | crate::ir::DType::I32) {
                            self.error(
                                op.arg_loc(1),
                                format!("gather: the indices are {idx}; expected i64 or i32"),
                            );
                            return None;
                        }
                        idx.dims.clone()
                    }
                };
                let idx_run = match indices {
                    Some(_) => Vec::new(),
                    None => args[1].run.clone(),
                };
                let idx_rank = idx_dims.len();
                let mut dims = x.dims[..a].to_vec();
                dims.extend(idx_dims);
                dims.extend(&x.dims[a + 1..]);
                if !idx_run.is_empty() {
                    let mut out = Shape::tensor(x.dtype, dims);
                    out.run = vec![None; out.rank()];
                    out.run[a..a + idx_rank].copy_from_slice(&idx_run);
                    return Some((kind, vec![out]));
                }
                if dims.len() > crate::ir::MAX_RANK {
                    self.error(
                        op.loc,
                        format!(
                            "gather: the result would have more than {} dimensions",
                            crate::ir::MAX_RANK
                        ),
                    );
                    return None;
                }
                Shape::tensor(x.dtype, dims)
            }
            OpKind::Slice {
                starts,
                ends,
                axes,
                steps,
            } => {
                let n = starts.len();
                let given_axes = if axes.is_empty() {
                    (0..n as i64).collect()
                } else {
                    axes.clone()
                };
                let given_steps = if steps.is_empty() {
                    vec![1; n]
                } else {
                    steps.clone()
                };
                if ends.len() != n || given_axes.len() != n || given_steps.len() != n {
                    self.error(decl, format!("slice: starts, ends, axes and steps need the same length ({n} starts, {} ends, {} axes, {} steps)", ends.len(), given_axes.len(), given_steps.len()));
                    return None;
                }
                let mut first = vec![0i64; x.rank()];
                let mut stride = vec![1i64; x.rank()];
                let mut dims = x.dims.clone();
                let mut seen = vec![false; x.rank()];
                for i in 0..n {
                    let a = self.axis(given_axes[i], x, name, decl)?;
                    if std::mem::replace(&mut seen[a], true) {
                        self.error(decl, format!("slice: axis {a} is given twice"));
                        return None;
                    }
                    let step = given_steps[i];
                    if step == 0 {
                        self.error(decl, "slice: steps must not be 0");
                        return None;
                    }
                    let (start, count) = slice_axis(starts[i], ends[i], step, x.dims[a] as i64);
                    first[a] = start;
                    stride[a] = step;
                    dims[a] = count;
                }
                *starts = first;
                *steps = stride;
                ends.clear();
                axes.clear();
                Shape::tensor(x.dtype, dims)
            }
            OpKind::Squeeze { axes } => {
                let mut drop = Vec::new();
                for &a in axes.iter() {
                    let a = self.axis(a, x, name, decl)?;
                    if x.dims[a] != 1 {
                        self.error(
                            decl,
                            format!("squeeze: axis {a} of {x} has size {}, not 1", x.dims[a]),
                        );
                        return None;
                    }
                    drop.push(a);
                }
                let dims: Vec<usize> = x
                    .dims
                    .iter()
                    .enumerate()
                    .filter(|&(i, &d)| {
                        if axes.is_empty() {
                            d != 1
                        } else {
                            !drop.contains(&i)
                        }
                    })
                    .map(|(_, &d)| d)
                    .collect();
                let out = Shape::tensor(x.dtype, dims);
                let to = out.dims.iter().map(|&d| d as i64).collect();
                return Some((OpKind::Reshape(ReshapeTo::Dims(to)), vec![out]));
            }
            OpKind::Unsqueeze { axes } => {
                let rank = x.rank() + axes.len();
                let probe = Shape::tensor(x.dtype, vec![1; rank]);
                let mut at = Vec::new();
                for &a in axes.iter() {
                    let a = self.axis(a, &probe, name, decl)?;
                    if at.contains(&a) {
                        self.error(decl, format!("unsqueeze: axis {a} is given twice"));
                        return None;
                    }
                    at.push(a);
                }
                if rank > crate::ir::MAX_RANK {
                    self.error(
                        decl,
                        format!(
                            "unsqueeze: the result would have more than {} dimensions",
                            crate::ir::MAX_RANK
                        ),
                    );
                    return None;
                }
                let mut rest = x.dims.iter();
                let dims: Vec<usize> = (0..rank)
                    .map(|i| {
                        if at.contains(&i) {
                            1
                        } else {
                            *rest.next().unwrap_or(&1)
                        }
                    })
                    .collect();
                let out = Shape::tensor(x.dtype, dims);
                let to = out.dims.iter().map(|&d| d as i64).collect();
                return Some((OpKind::Reshape(ReshapeTo::Dims(to)), vec![out]));
            }
            OpKind::SplitDyn { axis, parts } => {
                let a = self.axis(*axis, x, name, decl)?;
                *axis = a as i64;
                let s = &args[1];
                if s.dtype != crate::ir::DType::I64 || s.dims != [*parts] {
                    self.error(
                        op.arg_loc(1),
                        format!(
                            "split: the sizes are {s}; for {} they must be tensor<i64[{parts}]>",
                            plural(*parts, "result")
                        ),
                    );
                    return None;
                }
                let outs: Vec<Shape> = (0..*parts)
                    .map(|_| {
                        let mut o = Shape::tensor(x.dtype, x.dims.clone());
                        o.run = vec![None; x.rank()];
                        o.run[a] = Some(self.new_run());
                        o
                    })
                    .collect();
                return Some((kind, outs));
            }
            OpKind::Split { axis, sizes } => {
                let a = self.axis(*axis, x, name, decl)?;
                *axis = a as i64;
                let total = sizes.iter().try_fold(0usize, |t, &s| t.checked_add(s));
                // A size of 0 is an empty result (ONNX allows it).
                if total != Some(x.dims[a]) {
                    self.error(decl, format!("split: sizes {sizes:?} must add up to {}, the size of {x} along axis {a}", x.dims[a]));
                    return None;
                }
                let outs: Vec<Shape> = sizes
                    .iter()
                    .map(|&s| {
                        let mut o = x.clone();
                        o.dims[a] = s;
                        o
                    })
                    .collect();
                for o in &outs {
                    self.claim(op.loc, format_args!("split: the output {o}"), o)?;
                }
                return Some((kind, outs));
            }
            OpKind::Binary(bop) => {
                let y = &args[1];
                let Some(shape) = self.broadcast_runs(x, y) else {
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
                dilation,
                pad,
                ..
            } => {
                let name = match pk {
                    PoolKind::Max => "max_pool",
                    PoolKind::Avg => "avg_pool",
                };
                let n = self.spatial_rank(x, name, op.loc)?;
                if dilation.is_empty() {
                    *dilation = vec![1; n];
                }
                // The front end leaves one size for every dimension while the rank is unknown.
                for (what, v, at) in [
                    ("window", &mut *kernel, decl),
                    ("`stride`", stride, op.loc),
                    ("`dilation`", dilation, op.loc),
                ] {
                    if v.len() == 1 {
                        *v = vec![v[0]; n];
                    } else if v.len() != n {
                        self.error(
                            at,
                            format!(
                                "{name}: the {what} {} has {} but input {x} has {}",
                                join(v),
                                plural(v.len(), "size"),
                                plural(n, "spatial dimension")
                            ),
                        );
                        return None;
                    }
                }
                if let Padding::Written(w) = pad {
                    let Some(p) = Padding::expand(w, n) else {
                        self.error(
                            op.loc,
                            format!(
                                "{name}: padding {w:?} does not fit input {x}: give one number, one per spatial dimension ({n}) or a begin and an end for each ({})",
                                2 * n
                            ),
                        );
                        return None;
                    };
                    *pad = Padding::Explicit(p);
                }
                let (p, out) = self.window(name, op.loc, x, kernel, stride, dilation, pad)?;
                *pad = Padding::Explicit(p);
                window_output(x, x.channels(), &out)
            }
            OpKind::GlobalAvgPool => {
                let n = self.spatial_rank(x, name, op.loc)?;
                window_output(x, x.channels(), &vec![1; n])
            }
            OpKind::Concat { axis } => {
                let first = x.clone();
                let a = self.axis(*axis, x, name, decl)?;
                *axis = a as i64;
                let mut total = Some(0usize);
                for (i, s) in args.iter().enumerate() {
                    let same_elsewhere = s.rank() == first.rank()
                        && s.dtype == first.dtype
                        && (0..s.rank()).all(|d| d == a || s.dims[d] == first.dims[d]);
                    if !same_elsewhere || (a == 1 && s.kind != first.kind) {
                        let what = if a == 1 {
                            "the channel count".to_string()
                        } else {
                            format!("the size along axis {a}")
                        };
                        self.error(op.arg_loc(i), format!("concat: input {} is {s} but input 1 is {first}; only {what} may differ", i + 1));
                        return None;
                    }
                    total = total.and_then(|c| c.checked_add(s.dims[a]));
                }
                let Some(total) = total else {
                    self.error(op.loc, format!("concat: the output is too large: its size overflows (at most {MAX_BYTES} bytes)"));
                    return None;
                };
                let mut out = first;
                out.dims[a] = total;
                out
            }
            OpKind::Reshape(ReshapeTo::Flatten) => {
                // A view of the input's bytes: nothing new to count against `MAX_BYTES`.
                // `[N, rest]`; with N = 0 the rest is still the product of the other sizes.
                let rest = x.dims.iter().skip(1).product();
                return Some((kind, vec![Shape::vec(x.batch(), rest)]));
            }
            OpKind::Reshape(ReshapeTo::Dims(dims)) if x.is_dynamic() => {
                let known = dims
                    .iter()
                    .filter(|&&d| d > 0)
                    .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?));
                let minus = dims.iter().filter(|&&d| d == -1).count();
                let valid = dims.iter().all(|&d| d > 0 || d == -1) && minus == 1;
                let Some(known) = known.filter(|&k| valid && k > 0) else {
                    self.error(decl, format!("reshape: {x} has a size known only at run time: give the new sizes as numbers with one `-1` for the rest"));
                    return None;
                };
                let k = self.new_run();
                let out_dims = dims
                    .iter()
                    .map(|&d| {
                        if d == -1 {
                            x.elements() / known
                        } else {
                            d as usize
                        }
                    })
                    .collect();
                let mut out = Shape::tensor(x.dtype, out_dims);
                out.run = dims.iter().map(|&d| (d == -1).then_some(k)).collect();
                return Some((kind, vec![out]));
            }
            OpKind::Reshape(ReshapeTo::Dims(dims)) => {
                let mut out = Vec::new();
                let mut infer_at = None;
                for (i, &d) in dims.iter().enumerate() {
                    match d {
                        0 if i < x.rank() => out.push(x.dims[i]),
                        -1 if infer_at.is_none() => {
                            infer_at = Some(i);
                            out.push(1);
                        }
                        d if d > 0 => out.push(usize::try_from(d).unwrap_or(usize::MAX)),
                        _ => {
                            self.error(decl, format!("reshape: {dims:?} is not a valid shape for {x}: sizes are positive, `0` copies the input's size at that position, and one `-1` is inferred"));
                            return None;
                        }
                    }
                }
                let known = out.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
                if let Some(i) = infer_at {
                    match known {
                        Some(k) if k > 0 && x.elements().is_multiple_of(k) => {
                            out[i] = x.elements() / k
                        }
                        _ => {
                            self.error(
                                decl,
                                format!(
                                    "reshape: {x} has {} elements, which {dims:?} cannot hold",
                                    x.elements()
                                ),
                            );
                            return None;
                        }
                    }
                }
                let out = Shape::tensor(x.dtype, out);
                if out.rank() > crate::ir::MAX_RANK
                    || known.is_none()
                    || out.elements() != x.elements()
                {
                    self.error(
                        decl,
                        format!(
                            "reshape: {x} has {} elements but {dims:?} asks for {}",
                            x.elements(),
                            out.dims
                                .iter()
                                .map(|d| d.to_string())
                                .collect::<Vec<_>>()
                                .join("x")
                        ),
                    );
                    return None;
                }
                return Some((kind, vec![out]));
            }
            OpKind::Reshape(ReshapeTo::Type { ty, batch_given }) => {
                let mut ty = ty.clone();
                if !*batch_given {
                    ty.dims[0] = crate::ir::Dim::Known(x.batch());
                }
                // A symbol without a value was reported by the front end.
                let out = ty.bind(self.binding)?;
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
            OpKind::SeqEmpty(_)
            | OpKind::SeqConstruct
            | OpKind::SeqInsert { .. }
            | OpKind::SeqErase { .. }
            | OpKind::SeqAt { .. }
            | OpKind::SeqLen
            | OpKind::SeqInput { .. }
            | OpKind::SplitToSeq { .. }
            | OpKind::ConcatFromSeq { .. } => unreachable!("sequence ops have their own rules"),
            OpKind::View { ty, offset } => {
                let offset = *offset;
                // DeclBuffer's rule: a view fits in its buffer. `offset` counts the buffer's
                // elements; the view may read those bytes as another dtype when they fit, start
                // on a boundary of the new dtype, and are valid values of it.
                let Some(mut out) = ty.bind(self.binding) else {
                    self.error(decl, "view: the view's sizes must be numbers");
                    return None;
                };
                let name = self.name_of(op.args[0]);
                let retyped = out.dtype != x.dtype;
                if retyped {
                    // Any byte is a valid f32/f64/i64/i32/u8, but a bool must be 0 or 1.
                    let why = if out.dtype == crate::ir::DType::Bool
                        && x.dtype != crate::ir::DType::U8
                    {
                        Some(format!("{} bytes are not all valid bools (0 or 1); compare instead, like `not_equal(x, 0)`", x.dtype))
                    } else if out.dtype == crate::ir::DType::Bool {
                        Some("u8 values other than 0 and 1 are not valid bools; compare instead, like `not_equal(x, 0)`".to_string())
                    } else if self.g.is_external(op.args[0]) {
                        let what = if matches!(
                            self.g.values[self.g.alias_root(op.args[0]).index()].producer,
                            crate::ir::Producer::Input(_)
                        ) {
                            "a model input"
                        } else {
                            "the weights"
                        };
                        Some(format!("`{name}` is (a view of) {what}, whose {} values are not guaranteed to be aligned for {}; a view that changes dtype reads a tensor the network computes", x.dtype, out.dtype))
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        self.error(decl, format!("view: {out} cannot view {x}: {why}"));
                        self.error(
                            op.arg_loc(0),
                            format!("view: `{name}` ({x}) is the buffer viewed as {}", out.dtype),
                        );
                        return None;
                    }
                }
                let count = out.dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
                let (xs, ys) = (x.dtype.size(), out.dtype.size());
                let start = offset.checked_mul(xs);
                let end = count
                    .and_then(|c| c.checked_mul(ys))
                    .zip(start)
                    .and_then(|(b, s)| s.checked_add(b));
                if end.is_none_or(|e| e > x.bytes()) {
                    let need = match (start, end) {
                        (Some(s), Some(e)) if retyped => format!("bytes {s}..{e}"),
                        (_, Some(e)) => format!("elements {offset}..{}", e / ys),
                        _ => "more bytes than exist".to_string(),
                    };
                    let have = if retyped {
                        format!("{} bytes", x.bytes())
                    } else {
                        format!("{} elements", x.elements())
                    };
                    self.error(decl, format!("view: {out} at offset {offset} needs {need} but its buffer `{name}` is {x}, {have}"));
                    self.error(
                        op.arg_loc(0),
                        format!("view: `{name}` ({x}) is the buffer the view does not fit"),
                    );
                    return None;
                }
                let start = start.unwrap_or(0);
                // Arena regions are f32 slots, and a value of the view's dtype must be aligned.
                let align = ys.max(4);
                if !start.is_multiple_of(align) {
                    let of = if retyped {
                        format!(" (byte {start})")
                    } else {
                        String::new()
                    };
                    self.error(decl, format!("view: offset {offset} of {} values{of} does not start on a multiple of {align} bytes, which {} values need", x.dtype, out.dtype));
                    if retyped {
                        self.error(
                            op.arg_loc(0),
                            format!("view: `{name}` ({x}) is the buffer viewed as {}", out.dtype),
                        );
                    }
                    return None;
                }
                out.kind = Kind::Tensor;
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

    /// The element types an op accepts: most arithmetic is f32; data movement takes any dtype.
    fn dtypes(&mut self, op: &Op, args: &[Shape]) -> Option<()> {
        use crate::ir::{Act, DType};
        let name = match op.kind {
            OpKind::Unary(Act::Relu) => "relu",
            OpKind::Unary(Act::Clip { .. }) => "clip",
            OpKind::Unary(Act::LeakyRelu { .. }) => "leaky_relu",
            OpKind::Unary(Act::Sigmoid) => "sigmoid",
            OpKind::Unary(Act::Tanh) => "tanh",
            _ => op.kind.name(),
        };
        let x = &args[0];
        let ok = match &op.kind {
            OpKind::Conv { .. }
            | OpKind::ConvTranspose { .. }
            | OpKind::Dense { .. }
            | OpKind::BatchNorm { .. }
            | OpKind::Unary(_)
            | OpKind::Pool { .. }
            | OpKind::GlobalAvgPool
            | OpKind::Softmax { .. }
            | OpKind::Math(_)
            | OpKind::Pow
            | OpKind::Pad { .. } => x.dtype == DType::F32,
            OpKind::MatMul => matches!(x.dtype, DType::F32 | DType::F64),
            OpKind::Binary(_) | OpKind::Reduce { .. } => {
                !matches!(x.dtype, DType::U8 | DType::Bool)
            }
            _ => true,
        };
        if !ok {
            let wants = match &op.kind {
                OpKind::MatMul => "f32 or f64",
                OpKind::Binary(_) | OpKind::Reduce { .. } => "f32, f64, i64 or i32",
                _ => "f32",
            };
            self.error(op.arg_loc(0), format!("{name}: the input is {x}, but {name} computes in {wants}; convert it first with `cast(x, f32)`"));
            return None;
        }
        Some(())
    }

    /// A fresh run-time size variable.
    fn new_run(&mut self) -> u32 {
        self.runs += 1;
        self.runs - 1
    }

    /// Broadcasting that knows run-time sizes: a run-time size matches only itself or a 1.
    fn broadcast_runs(&mut self, a: &Shape, b: &Shape) -> Option<Shape> {
        if !a.is_dynamic() && !b.is_dynamic() {
            return broadcast(a, b);
        }
        if a.dtype != b.dtype {
            return None;
        }
        let rank = a.rank().max(b.rank());
        let at = |s: &Shape, i: usize| -> (usize, Option<u32>) {
            let off = rank - s.rank();
            if i < off {
                (1, None)
            } else {
                (s.dims[i - off], s.run_dim(i - off))
            }
        };
        let mut dims = Vec::new();
        let mut run = Vec::new();
        for i in 0..rank {
            let (x, y) = (at(a, i), at(b, i));
            let d = match (x, y) {
                ((n, None), (m, None)) if n == m || m == 1 => (n, None),
                ((1, None), (m, None)) => (m, None),
                ((n, Some(r)), (_, Some(s))) if r == s => (n, Some(r)),
                ((n, Some(r)), (1, None)) | ((1, None), (n, Some(r))) => (n, Some(r)),
                _ => return None,
            };
            dims.push(d.0);
            run.push(d.1);
        }
        let kind = if a.rank() >= b.rank() { a.kind } else { b.kind };
        let mut out = Shape::new(a.dtype, dims, kind);
        out.run = run;
        Some(out)
    }

    /// An axis of `x`, negative counting from the end, as an index.
    fn axis(&mut self, axis: i64, x: &Shape, op: &str, at: Loc) -> Option<usize> {
        let rank = x.rank() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        if !(0..rank).contains(&a) {
            self.error(
                at,
                format!(
                    "{op}: axis {axis} is out of range for {x}, which has {}",
                    plural(x.rank(), "dimension")
                ),
            );
            return None;
        }
        Some(a as usize)
    }

    /// The number of spatial dimensions of a window op's input: 1 to 3 (`[N, C, L]`,
    /// `[N, C, H, W]`, `[N, C, D, H, W]`).
    fn spatial_rank(&mut self, x: &Shape, op: &str, at: Loc) -> Option<usize> {
        match x.rank() {
            3..=5 => Some(x.rank() - 2),
            0..=2 => {
                self.error(
                    at,
                    format!("{op}: input is {x}, expected a feature map `fm<...>`"),
                );
                None
            }
            _ => {
                self.error(
                    at,
                    format!("{op}: input is {x}, expected 1, 2 or 3 spatial dimensions (`[N, C, L]`, `[N, C, H, W]` or `[N, C, D, H, W]`)"),
                );
                None
            }
        }
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

    /// Resolves padding and computes the output size of a sliding window over the spatial
    /// dimensions of `s` (as many as `k` has sizes), with an error when a size would shrink to
    /// zero or below. Returns the explicit padding (begins, then ends) and the output sizes.
    #[allow(clippy::too_many_arguments)]
    fn window(
        &mut self,
        op: &str,
        at: Loc,
        s: &Shape,
        k: &[usize],
        stride: &[usize],
        dil: &[usize],
        pad: &Padding,
    ) -> Option<(Vec<usize>, Vec<usize>)> {
        let n = k.len();
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
                if op.ends_with("pool") && (0..n).any(|d| p[d].max(p[d + n]) >= k[d]) =>
            {
                self.error(
                    at,
                    format!("{op}: padding {p:?} must be smaller than the window {k:?}"),
                );
                return None;
            }
            _ => {}
        }
        let sizes = s.spatial_dims();
        let names: &[&str] = match n {
            1 => &["length"],
            2 => &["height", "width"],
            _ => &["depth", "height", "width"],
        };
        // What one window spans, dilation included; `None` if that overflows.
        let extent: Vec<Option<usize>> = (0..n)
            .map(|d| (k[d] - 1).checked_mul(dil[d])?.checked_add(1))
            .collect();
        let too_large = format!("{op}: the window is too large: kernel {k:?} with dilation {dil:?} spans more than usize::MAX");
        let pad = match pad {
            Padding::Explicit(p) => p.clone(),
            Padding::Written(_) => unreachable!("window ops resolve written padding first"),
            Padding::Same => {
                // ONNX SAME_UPPER: the output is ceil(in / stride); extra padding goes at the end.
                // `(out - 1) * stride < in`, so only adding the window's extent can overflow.
                let total = |d: usize| {
                    let i = sizes[d];
                    let out = i.div_ceil(stride[d]);
                    Some(
                        ((out - 1) * stride[d])
                            .checked_add(extent[d]?)?
                            .saturating_sub(i),
                    )
                };
                let Some(totals) = (0..n).map(total).collect::<Option<Vec<usize>>>() else {
                    self.error(at, too_large);
                    return None;
                };
                let begins = totals.iter().map(|t| t / 2);
                let ends = totals.iter().map(|t| t - t / 2);
                begins.chain(ends).collect()
            }
        };
        let mut out = vec![0; n];
        for (d, (&size, name)) in sizes.iter().zip(names).enumerate() {
            let Some(extent) = extent[d] else {
                self.error(at, too_large);
                return None;
            };
            let Some(padded) = size
                .checked_add(pad[d])
                .and_then(|p| p.checked_add(pad[d + n]))
            else {
                self.error(
                    at,
                    format!(
                        "{op}: the padded {name} is too large: {size} + {} + {} overflows",
                        pad[d],
                        pad[d + n]
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

/// The result of a window op on `x`: `[N, c, out...]`, a feature map in 2-D and otherwise
/// spelt like the input.
fn window_output(x: &Shape, c: usize, out: &[usize]) -> Shape {
    let mut dims = vec![x.batch(), c];
    dims.extend(out);
    let kind = if out.len() == 2 { Kind::Fm } else { x.kind };
    Shape::new(crate::ir::DType::F32, dims, kind)
}

/// `3x3x3`: sizes as the DSL writes them.
fn join(v: &[usize]) -> String {
    v.iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join("x")
}

/// A 3-D window attribute as the kernels' `[usize; 3]`.
fn to3(v: &[usize]) -> [usize; 3] {
    v.try_into().expect("a 3-D window has 3 sizes")
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

/// Whether an op accepts values whose sizes are known only at run time.
fn dynamic_ok(kind: &OpKind) -> bool {
    matches!(
        kind,
        OpKind::Unary(_)
            | OpKind::Math(_)
            | OpKind::Cast(_)
            | OpKind::Copy
            | OpKind::Binary(_)
            | OpKind::Compare(_)
            | OpKind::Reduce { .. }
            | OpKind::Reshape(ReshapeTo::Dims(_))
            | OpKind::Gather { indices: None, .. }
    )
}

/// ONNX `Slice` on one axis of size `dim`: the first index taken and how many, with ONNX's
/// clamping of out-of-range bounds.
fn slice_axis(start: i64, end: i64, step: i64, dim: i64) -> (i64, usize) {
    if dim == 0 {
        return (0, 0);
    }
    let wrap = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
    let (start, end) = (wrap(start), wrap(end));
    // `(span - 1) / |step| + 1` elements: no overflow for any step.
    let count = |span: i64| (span as u64 - 1) / step.unsigned_abs() + 1;
    if step > 0 {
        let (s, e) = (start.clamp(0, dim), end.clamp(0, dim));
        (s, if e > s { count(e - s) as usize } else { 0 })
    } else {
        let (s, e) = (start.clamp(0, dim - 1), end.clamp(-1, dim - 1));
        (s, if s > e { count(s - e) as usize } else { 0 })
    }
}

/// Bytes the planner reserves for a tensor: its data rounded up to the 64-byte alignment (at
/// least 64). `None` if that does not fit in `usize`.
fn reserved_bytes(shape: &Shape) -> Option<usize> {
    // A zero-size tensor holds nothing, but later passes still multiply its other sizes
    // (`outer`, `inner`, strides): they must fit the budget as if the 0 were a 1.
    shape
        .dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d.max(1)))?
        .checked_mul(shape.dtype.size())
        .filter(|&b| b <= MAX_BYTES)?;
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
