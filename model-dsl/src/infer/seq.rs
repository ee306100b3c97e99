//! Shape rules of the sequence ops.
//!
//! A sequence is a compile-time structure: inference tracks, for every sequence value, the
//! tensors it may hold ([`SeqVal`]): graph values, or pieces of a `split_to_seq`'s buffer. Its
//! length is always known, so positions written as numbers are checked here, at their token.
//! A position given at run time makes the order a run-time fact: the sequence then lists
//! *candidates* and the generated code keeps the order in a small array.
//!
//! A *run-time sequence* ([`SeqVal::run`]: a `split_to_seq` with sizes given at run time, a
//! sequence input without a length, and what `insert`/`erase` make of them) has a length and
//! element sizes known only at run time. Inference tracks only its element type, widening a
//! size to `?` when an `insert` brings another; positions on it are checked at run time, and
//! `at`/`concat_from_seq` give values with run-time sizes where the type has `?`.

use super::Infer;

/// The most elements a sequence may have: every element is planned at compile time (and a
/// run-time order is an array of this many indices on the stack).
pub const MAX_SEQ_LEN: usize = 1 << 12;
use crate::diag::{plural, Loc};
use crate::ir::{DType, Elem, Op, OpKind, Pos, SeqSplit, SeqVal, Shape, ValueId};

impl Infer<'_, '_> {
    /// The rule of a sequence op: its resolved kind, its result's shape (a rank-0 placeholder
    /// of the element dtype for a sequence result) and, for a sequence result, what it holds.
    pub(super) fn seq_op(&mut self, op: &Op) -> Option<(OpKind, Shape, Option<SeqVal>)> {
        let name = op.kind.name();
        let mut kind = op.kind.clone();
        let placeholder = |d: DType| Shape::tensor(d, vec![]);
        if let Some(r) = self.run_seq_op(op) {
            return r;
        }
        match &mut kind {
            OpKind::SeqEmpty(d) => {
                let s = SeqVal {
                    dtype: *d,
                    elems: vec![],
                    len: 0,
                    run_order: false,
                    run: None,
                };
                Some((kind.clone(), placeholder(s.dtype), Some(s)))
            }
            OpKind::SeqConstruct => {
                let mut elems: Vec<Elem> = Vec::new();
                for (i, &a) in op.args.iter().enumerate() {
                    let x = self.tensor_arg(op, i)?;
                    if let Some(first) = elems.first() {
                        if first.shape.dtype != x.dtype {
                            self.error(op.arg_loc(i), format!("seq_construct: element {} is {x} but element 1 is {}: a sequence's elements share one dtype", i + 1, first.shape));
                            return None;
                        }
                    }
                    elems.push(Elem {
                        base: a,
                        offset: 0,
                        shape: x,
                    });
                }
                let s = SeqVal {
                    dtype: elems[0].shape.dtype,
                    len: elems.len(),
                    elems,
                    run_order: false,
                    run: None,
                };
                Some((kind.clone(), placeholder(s.dtype), Some(s)))
            }
            OpKind::SeqInsert { at } => {
                let mut s = self.seq_arg(op, 0)?;
                let x = self.tensor_arg(op, 1)?;
                if x.dtype != s.dtype {
                    self.error(
                        op.arg_loc(1),
                        format!(
                            "insert: {x} does not fit the sequence `{}` ({}): its elements are {}",
                            self.name_of(op.args[0]),
                            s.type_text(),
                            s.dtype
                        ),
                    );
                    return None;
                }
                let p = match *at {
                    Pos::Default => Some(s.len),
                    Pos::Static(i) => Some(self.position(op, i, s.len, true)?),
                    Pos::Run => {
                        self.run_position(op, 2)?;
                        None
                    }
                };
                let elem = Elem {
                    base: op.args[1],
                    offset: 0,
                    shape: x,
                };
                match p {
                    Some(p) if !s.run_order => s.elems.insert(p, elem),
                    _ => {
                        s.run_order = true;
                        s.elems.push(elem);
                    }
                }
                s.len += 1;
                if s.elems.len() > MAX_SEQ_LEN {
                    self.error(
                        op.loc,
                        format!("insert: a sequence may have at most {MAX_SEQ_LEN} elements"),
                    );
                    return None;
                }
                Some((kind.clone(), placeholder(s.dtype), Some(s)))
            }
            OpKind::SeqErase { at } => {
                let mut s = self.seq_arg(op, 0)?;
                if s.len == 0 {
                    self.error(
                        op.arg_loc(0),
                        format!(
                            "erase: the sequence `{}` is empty",
                            self.name_of(op.args[0])
                        ),
                    );
                    return None;
                }
                let p = match *at {
                    Pos::Default => Some(s.len - 1),
                    Pos::Static(i) => Some(self.position(op, i, s.len, false)?),
                    Pos::Run => {
                        self.run_position(op, 1)?;
                        None
                    }
                };
                match p {
                    Some(p) if !s.run_order => {
                        s.elems.remove(p);
                    }
                    _ => s.run_order = true,
                }
                s.len -= 1;
                Some((kind.clone(), placeholder(s.dtype), Some(s)))
            }
            OpKind::SeqAt { at } => {
                let s = self.seq_arg(op, 0)?;
                if s.len == 0 {
                    self.error(
                        op.arg_loc(0),
                        format!("at: the sequence `{}` is empty", self.name_of(op.args[0])),
                    );
                    return None;
                }
                let p = match *at {
                    Pos::Static(i) => Some(self.position(op, i, s.len, false)?),
                    Pos::Run => {
                        self.run_position(op, 1)?;
                        None
                    }
                    Pos::Default => None,
                };
                if let Some(p) = p.filter(|&p| !s.run_order && s.elems[p].viewable()) {
                    // A view of the element: nothing new to count against the byte budget.
                    return Some((kind.clone(), s.elems[p].shape.clone(), None));
                }
                // Selected at run time and copied: every candidate must have the result's shape.
                let first = s.elems[0].shape.clone();
                if let Some(e) = s.elems.iter().find(|e| e.shape != first) {
                    self.error(op.loc, format!("at: the element is chosen at run time, so the candidates must have one shape, but `{}` may hold {first} and {}", self.name_of(op.args[0]), e.shape));
                    return None;
                }
                self.claim(op.loc, format_args!("at: the output {first}"), &first)?;
                Some((kind.clone(), first, None))
            }
            OpKind::SeqLen => {
                self.seq_arg(op, 0)?;
                let out = Shape::tensor(DType::I64, vec![]);
                self.claim(op.loc, format_args!("len: the output {out}"), &out)?;
                Some((kind.clone(), out, None))
            }
            OpKind::SplitToSeq {
                axis,
                split,
                keepdims,
            } => {
                let x = self.tensor_arg(op, 0)?;
                let decl = op.decl.unwrap_or(op.loc);
                let a = self.axis(*axis, &x, name, op.loc)?;
                *axis = a as i64;
                let d = x.dims[a];
                let pieces = match split {
                    SeqSplit::Ones => d,
                    SeqSplit::Chunk(c) => d.div_ceil(*c),
                    SeqSplit::Sizes(s) => s.len(),
                    SeqSplit::Run => unreachable!("`run_seq_op` types it"),
                };
                if pieces > MAX_SEQ_LEN {
                    self.error(decl, format!("split_to_seq: {x} would give {pieces} pieces along axis {a}; a sequence may have at most {MAX_SEQ_LEN} elements"));
                    return None;
                }
                let sizes: Vec<usize> = match split {
                    SeqSplit::Ones => vec![1; d],
                    SeqSplit::Chunk(c) => {
                        let c = *c;
                        (0..d.div_ceil(c)).map(|k| c.min(d - k * c)).collect()
                    }
                    SeqSplit::Sizes(sizes) => sizes.clone(),
                    SeqSplit::Run => unreachable!("`run_seq_op` types it"),
                };
                let total = sizes.iter().try_fold(0usize, |t, &s| t.checked_add(s));
                // A size of 0 is an empty element (ONNX allows it).
                if total != Some(d) {
                    self.error(decl, format!("split_to_seq: sizes {sizes:?} must add up to {d}, the size of {x} along axis {a}"));
                    return None;
                }
                let outer: usize = x.dims[..a].iter().product();
                let inner: usize = x.dims[a + 1..].iter().product();
                // Pieces of a tensor whose sizes before the axis are all 1 are runs of its bytes:
                // views, no copy. Otherwise the op copies them, one after the other, into a
                // buffer of its own (the sequence value's storage).
                let in_place = outer == 1;
                let base = if in_place { op.args[0] } else { op.result() };
                let drop_axis = *split == SeqSplit::Ones && !*keepdims;
                let mut elems = Vec::with_capacity(sizes.len());
                let mut at = 0usize;
                for &size in &sizes {
                    let mut shape = x.clone();
                    shape.kind = crate::ir::Kind::Tensor;
                    shape.dims[a] = size;
                    if drop_axis {
                        shape.dims.remove(a);
                    }
                    let offset = if in_place {
                        at * inner
                    } else {
                        outer * at * inner
                    };
                    elems.push(Elem {
                        base,
                        offset,
                        shape,
                    });
                    at += size;
                }
                if !in_place {
                    self.claim(op.loc, format_args!("split_to_seq: the pieces of {x}"), &x)?;
                }
                let s = SeqVal {
                    dtype: x.dtype,
                    len: elems.len(),
                    elems,
                    run_order: false,
                    run: None,
                };
                Some((kind.clone(), placeholder(s.dtype), Some(s)))
            }
            OpKind::ConcatFromSeq { axis, new_axis } => {
                let s = self.seq_arg(op, 0)?;
                let seq_name = self.name_of(op.args[0]);
                if s.run_order {
                    self.error(op.loc, format!("concat_from_seq: the order of `{seq_name}` is decided at run time (a position given as a value); concatenation needs it at compile time"));
                    return None;
                }
                let Some(first) = s.elems.first().map(|e| e.shape.clone()) else {
                    self.error(
                        op.arg_loc(0),
                        format!("concat_from_seq: the sequence `{seq_name}` is empty"),
                    );
                    return None;
                };
                let rank = first.rank() + usize::from(*new_axis);
                let probe = Shape::tensor(first.dtype, vec![1; rank]);
                let a = self.axis(*axis, &probe, name, op.loc)?;
                *axis = a as i64;
                for (i, e) in s.elems.iter().enumerate() {
                    let fits = e.shape.rank() == first.rank()
                        && (0..first.rank())
                            .all(|d| (d == a && !*new_axis) || e.shape.dims[d] == first.dims[d]);
                    if !fits {
                        let what = if *new_axis {
                            "elements stacked along a new axis must have one shape".to_string()
                        } else {
                            format!("only the size along axis {a} may differ")
                        };
                        self.error(op.loc, format!("concat_from_seq: element {i} of `{seq_name}` is {} but element 0 is {first}; {what}", e.shape));
                        return None;
                    }
                }
                let mut out = first.clone();
                out.kind = crate::ir::Kind::Tensor;
                if *new_axis {
                    out.dims.insert(a, s.len);
                } else {
                    out.dims[a] = s.elems.iter().map(|e| e.shape.dims[a]).sum();
                }
                self.claim(
                    op.loc,
                    format_args!("concat_from_seq: the output {out}"),
                    &out,
                )?;
                Some((kind.clone(), out, None))
            }
            _ => unreachable!("only sequence ops come here"),
        }
    }

    /// The rule of a sequence op that makes or reads a run-time sequence, or `None` for the
    /// rules of compile-time sequences. Inner `None`: an error was reported.
    #[allow(clippy::type_complexity)]
    fn run_seq_op(&mut self, op: &Op) -> Option<Option<(OpKind, Shape, Option<SeqVal>)>> {
        let kind = op.kind.clone();
        let name = kind.name();
        let run = |dtype: DType, dims: Vec<Option<usize>>| SeqVal {
            dtype,
            elems: vec![],
            len: 0,
            run_order: false,
            run: Some(dims),
        };
        let placeholder = |d: DType| Shape::tensor(d, vec![]);
        match &kind {
            OpKind::SeqInput { dtype, dims, .. } => {
                let s = run(*dtype, dims.clone());
                return Some(Some((kind.clone(), placeholder(*dtype), Some(s))));
            }
            OpKind::SplitToSeq {
                axis,
                split: SeqSplit::Run,
                ..
            } => {
                let r = (|| {
                    let x = self.tensor_arg(op, 0)?;
                    let a = self.axis(*axis, &x, name, op.loc)?;
                    let sizes = self.shape(op.args[1])?.clone();
                    if sizes.dtype != DType::I64 || sizes.rank() != 1 {
                        self.error(op.arg_loc(1), format!("split_to_seq: run-time sizes are a 1-D i64 tensor, like `tensor<i64[3]>`, not {sizes}"));
                        return None;
                    }
                    let mut dims: Vec<Option<usize>> = x.dims.iter().map(|&d| Some(d)).collect();
                    dims[a] = None;
                    let mut kind = kind.clone();
                    if let OpKind::SplitToSeq { axis, .. } = &mut kind {
                        *axis = a as i64;
                    }
                    Some((kind, placeholder(x.dtype), Some(run(x.dtype, dims))))
                })();
                return Some(r);
            }
            _ => {}
        }
        // The other ops are run-time ones when they read a run-time sequence.
        if !matches!(
            kind,
            OpKind::SeqInsert { .. }
                | OpKind::SeqErase { .. }
                | OpKind::SeqAt { .. }
                | OpKind::SeqLen
                | OpKind::ConcatFromSeq { .. }
        ) {
            return None;
        }
        let dims = self
            .seqs
            .get(op.args.first()?.index())?
            .as_ref()?
            .run
            .clone()?;
        let s = self.seq_arg(op, 0);
        let dtype = s.as_ref().map_or(DType::F32, |s| s.dtype);
        let seq_name = self.name_of(op.args[0]);
        let elem = crate::ir::run_elem_text(dtype, &dims);
        let r = (|| match &kind {
            OpKind::SeqInsert { at } => {
                if *at == Pos::Run {
                    self.run_position(op, 2)?;
                }
                let x = self.shape(op.args[1])?.clone();
                if self.seqs[op.args[1].index()].is_some() {
                    self.error(
                        op.arg_loc(1),
                        "insert: expected a tensor, but this is a sequence; sequences do not nest",
                    );
                    return None;
                }
                if x.dtype != dtype || x.rank() != dims.len() {
                    self.error(op.arg_loc(1), format!("insert: {x} does not fit the sequence `{seq_name}`, whose elements are {elem}"));
                    return None;
                }
                // The element type widens to `?` where the new element's size differs.
                let wider = dims
                    .iter()
                    .enumerate()
                    .map(|(i, d)| d.filter(|&d| x.run_dim(i).is_none() && x.dims[i] == d))
                    .collect();
                Some((kind.clone(), placeholder(dtype), Some(run(dtype, wider))))
            }
            OpKind::SeqErase { at } => {
                if *at == Pos::Run {
                    self.run_position(op, 1)?;
                }
                Some((
                    kind.clone(),
                    placeholder(dtype),
                    Some(run(dtype, dims.clone())),
                ))
            }
            OpKind::SeqAt { at } => {
                if *at == Pos::Run {
                    self.run_position(op, 1)?;
                }
                let mut out = Shape::tensor(dtype, dims.iter().map(|d| d.unwrap_or(0)).collect());
                if dims.iter().any(Option::is_none) {
                    out.run = dims
                        .iter()
                        .map(|d| d.is_none().then(|| self.new_run()))
                        .collect();
                } else {
                    self.claim(op.loc, format_args!("at: the output {out}"), &out)?;
                }
                Some((kind.clone(), out, None))
            }
            OpKind::SeqLen => {
                let out = Shape::tensor(DType::I64, vec![]);
                self.claim(op.loc, format_args!("len: the output {out}"), &out)?;
                Some((kind.clone(), out, None))
            }
            OpKind::ConcatFromSeq { axis, new_axis } => {
                let rank = dims.len() + usize::from(*new_axis);
                let probe = Shape::tensor(dtype, vec![1; rank]);
                let a = self.axis(*axis, &probe, name, op.loc)?;
                let unknown = (0..dims.len()).find(|&d| dims[d].is_none() && (*new_axis || d != a));
                if let Some(d) = unknown {
                    self.error(op.loc, format!("concat_from_seq: the elements of `{seq_name}` are {elem}, and their size along axis {d} is decided per element at run time; only the size along the concatenation axis may vary"));
                    return None;
                }
                let mut known: Vec<usize> = dims.iter().map(|d| d.unwrap_or(0)).collect();
                if *new_axis {
                    known.insert(a, 0);
                }
                let mut out = Shape::tensor(dtype, known);
                out.run = vec![None; rank];
                out.run[a] = Some(self.new_run());
                let mut kind = kind.clone();
                if let OpKind::ConcatFromSeq { axis, .. } = &mut kind {
                    *axis = a as i64;
                }
                Some((kind, out, None))
            }
            _ => unreachable!("only the ops that read a sequence come here"),
        })();
        Some(r)
    }

    /// Argument `i` as a sequence, or an error at it.
    fn seq_arg(&mut self, op: &Op, i: usize) -> Option<SeqVal> {
        let v = op.args[i];
        if let Some(s) = &self.seqs[v.index()] {
            return Some(s.clone());
        }
        let shape = self.shape(v)?.clone();
        let name = op.kind.name();
        self.error(
            op.arg_loc(i),
            format!("{name}: expected a sequence, but this is {shape}; make one with `seq_construct(...)`, `seq_empty(dtype)` or `split_to_seq(...)`"),
        );
        None
    }

    /// Argument `i` as a tensor with static sizes, or an error at it.
    fn tensor_arg(&mut self, op: &Op, i: usize) -> Option<Shape> {
        let v = op.args[i];
        let name = op.kind.name();
        if let Some(s) = &self.seqs[v.index()] {
            let msg = format!(
                "{name}: expected a tensor, but this is a sequence ({}); sequences do not nest",
                s.type_text()
            );
            self.error(op.arg_loc(i), msg);
            return None;
        }
        let shape = self.shape(v)?.clone();
        if shape.is_dynamic() {
            self.error(op.arg_loc(i), format!("{name}: {shape} has a size known only at run time; sequence elements need static sizes"));
            return None;
        }
        Some(shape)
    }

    /// A position written as a number, checked against the sequence's length: `0..len` (or
    /// `0..=len` for `insert`), negative counting from the end. The error points at the number.
    fn position(&mut self, op: &Op, i: i64, len: usize, insert: bool) -> Option<usize> {
        let n = len as i64;
        let hi = if insert { n } else { n - 1 };
        let p = if i < 0 { i + n } else { i };
        let at: Loc = op.arg_loc(op.args.len());
        if !(0..=hi).contains(&p) {
            let name = op.kind.name();
            let seq = self.name_of(op.args[0]);
            let valid = if hi < 0 {
                "none".to_string()
            } else {
                format!("{} to {hi}", -n)
            };
            self.error(at, format!("{name}: position {i} is out of range for `{seq}`, a sequence of {} (valid positions: {valid})", plural(len, "element")));
            return None;
        }
        Some(p as usize)
    }

    /// Checks that argument `i`, a position given at run time, is an i64 scalar.
    fn run_position(&mut self, op: &Op, i: usize) -> Option<()> {
        let v = op.args[i];
        let shape = self.tensor_arg(op, i)?;
        if shape.dtype != DType::I64 || shape.elements() != 1 {
            let name = op.kind.name();
            self.error(op.arg_loc(i), format!("{name}: a position given at run time must be an i64 scalar (`tensor<i64[]>`), but `{}` is {shape}", self.name_of(v)));
            return None;
        }
        Some(())
    }

    /// The user's name of a value, or how it was made.
    pub(super) fn name_of(&self, v: ValueId) -> String {
        let value = &self.g.values[v.index()];
        match (&value.name, value.producer) {
            (Some(n), _) => n.clone(),
            (None, crate::ir::Producer::Input(k)) => self.g.inputs[k].name.clone(),
            (None, crate::ir::Producer::Op { op, .. }) => {
                format!("the {} result", self.g.op(op).kind.name())
            }
            (None, _) => format!("%{}", v.0),
        }
    }
}
