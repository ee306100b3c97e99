//! The argument reader: the arguments of one DSL call, consumed as the op's lowering asks for
//! them; what is left at the end is reported as unexpected. Only syntax is checked here (is it
//! a number, a pair, a padding?); shapes are inference's business.

use std::collections::VecDeque;

use proc_macro2::Span;
use syn::Ident;

use super::dsl::Builder;
use crate::diag::closest;
use crate::ir::Padding;
use crate::syntax::{Arg, Expr, Num, ParamName, ParamType, TypeExpr, Value};

pub(super) struct Args<'a> {
    pub op: String,
    pub op_span: Span,
    positional: VecDeque<(usize, Value)>,
    named: Vec<(&'a Ident, &'a Value)>,
    params: Vec<(&'a ParamName, &'a ParamType)>,
    taken_named: Vec<String>,
    all_positional: Vec<Span>,
}

impl<'a> Args<'a> {
    pub fn new(op: &Ident, args: &'a [Arg]) -> Self {
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

    /// Spans of every positional argument, in order.
    pub fn positional_spans(&self) -> &[Span] {
        &self.all_positional
    }

    pub fn named_span(&self, name: &str) -> Option<Span> {
        self.named
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, _)| n.span())
    }

    /// The `i`th positional argument not yet taken, without taking it.
    pub fn peek_positional(&self, i: usize) -> Option<&Value> {
        self.positional.get(i).map(|(_, v)| v)
    }

    pub fn take_positional(&mut self) -> Option<Value> {
        self.positional.pop_front().map(|(_, v)| v)
    }

    pub fn positional_type(&mut self, cx: &mut Builder) -> Option<TypeExpr> {
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

    /// A positional window size: one number (for every spatial dimension; `n`, the spatial
    /// rank, may still be unknown), or one per spatial dimension.
    pub fn positional_sizes(
        &mut self,
        cx: &mut Builder,
        what: &str,
        n: Option<usize>,
    ) -> Option<Vec<usize>> {
        match self.take_positional() {
            Some(v) => sizes_of(cx, &v, &format!("{}: the window", self.op), n),
            None => {
                cx.error(self.op_span, format!("{}: missing {what}", self.op));
                None
            }
        }
    }

    pub fn param(
        &mut self,
        cx: &mut Builder,
        what: &str,
    ) -> Option<(&'a ParamName, &'a ParamType)> {
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

    pub fn float(&mut self, cx: &mut Builder, name: &str, default: f64) -> Option<f64> {
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

    pub fn bool(&mut self, cx: &mut Builder, name: &str, default: bool) -> Option<bool> {
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

    /// Whether the named argument is an expression (a tensor) rather than a literal.
    pub fn named_is_expr(&self, name: &str) -> bool {
        self.named
            .iter()
            .any(|(n, v)| *n == name && matches!(v, Value::Expr(_)))
    }

    /// The named argument as an expression (a tensor), if it is one.
    pub fn named_expr(&mut self, name: &str) -> Option<Expr> {
        match self.named(name)? {
            Value::Expr(e) => Some(e.clone()),
            _ => None,
        }
    }

    /// A named whole number that may be negative (an axis).
    pub fn int(&mut self, cx: &mut Builder, name: &str) -> Option<Option<i64>> {
        match self.named(name) {
            None => Some(None),
            Some(Value::Int(n)) => Some(i64::try_from(n.value).ok()),
            Some(Value::Float(f, _)) if f.fract() == 0.0 && *f < 0.0 && *f >= -1e9 => {
                Some(Some(*f as i64))
            }
            Some(other) => {
                cx.error(
                    other.span(),
                    format!("{}: `{name}` must be a whole number", self.op),
                );
                None
            }
        }
    }

    /// A named list of whole numbers, `[0, -1]`; a single number is a list of one.
    pub fn list(&mut self, cx: &mut Builder, name: &str) -> Option<Option<Vec<i64>>> {
        match self.named(name) {
            None => Some(None),
            Some(Value::List(items, _)) => Some(Some(items.clone())),
            Some(Value::Int(n)) => Some(i64::try_from(n.value).ok().map(|n| vec![n])),
            Some(Value::Float(f, _)) if f.fract() == 0.0 && *f < 0.0 && *f >= -1e9 => {
                Some(Some(vec![*f as i64]))
            }
            Some(other) => {
                cx.error(
                    other.span(),
                    format!(
                        "{}: `{name}` must be a list of whole numbers, like `[0, 2]`",
                        self.op
                    ),
                );
                None
            }
        }
    }

    pub fn usize(&mut self, cx: &mut Builder, name: &str) -> Option<Option<usize>> {
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

    /// A named size: one number, or one per spatial dimension (`n` of them when the op knows
    /// its spatial rank, else 2 or 3), as `2x2x2` or `(1, 2, 2)`.
    pub fn sizes(
        &mut self,
        cx: &mut Builder,
        name: &str,
        n: Option<usize>,
    ) -> Option<Option<Vec<usize>>> {
        match self.named(name) {
            None => Some(None),
            Some(v) => sizes_of(cx, v, &format!("{}: `{name}`", self.op), n).map(Some),
        }
    }

    /// `pad = ...`: `same`, `valid`, one number, one per spatial dimension (both ends) or a
    /// begin and an end per dimension. With the spatial rank `n` known it is resolved to
    /// [`Padding::Explicit`] here, otherwise inference resolves the [`Padding::Written`] form.
    pub fn padding(&mut self, cx: &mut Builder, n: Option<usize>) -> Option<Padding> {
        let written = match self.named("pad") {
            None => vec![0],
            Some(Value::Expr(Expr::Name(i))) if i == "same" => return Some(Padding::Same),
            Some(Value::Expr(Expr::Name(i))) if i == "valid" => vec![0],
            Some(v) => {
                let items = match v {
                    Value::Int(n) => vec![n.value],
                    Value::Tuple(items, _) if [2, 3, 4, 6].contains(&items.len()) => items
                        .iter()
                        .map(|i| int_of(cx, i, "pad"))
                        .collect::<Option<_>>()?,
                    _ => vec![],
                };
                match n {
                    Some(n) if !items.is_empty() => match Padding::expand(&items, n) {
                        Some(p) => return Some(Padding::Explicit(p)),
                        None => {
                            cx.error(v.span(), pad_message(&self.op, Some(n)));
                            return None;
                        }
                    },
                    _ if items.is_empty() => {
                        cx.error(v.span(), pad_message(&self.op, n));
                        return None;
                    }
                    _ => items,
                }
            }
        };
        Some(match n.and_then(|n| Padding::expand(&written, n)) {
            Some(p) => Padding::Explicit(p),
            None => Padding::Written(written),
        })
    }

    /// Reports arguments nobody asked for; returns whether there were none. After a failed op
    /// (`lowered == false`) only names the op does not know at all are reported.
    pub fn finish(self, cx: &mut Builder, lowered: bool) -> bool {
        let allowed = allowed_named(&self.op);
        let before = cx.error_count();
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
        cx.error_count() == before
    }
}

fn allowed_named(op: &str) -> &'static [&'static str] {
    match op {
        "conv" | "conv2d" => &["stride", "pad", "dilation", "groups", "bias"],
        "conv_transpose" => &[
            "stride",
            "pad",
            "dilation",
            "groups",
            "bias",
            "output_padding",
        ],
        "dense" => &["bias"],
        "batch_norm" => &["eps"],
        "clip" => &["min", "max"],
        "leaky_relu" => &["alpha"],
        "max_pool" => &["stride", "pad", "dilation"],
        "avg_pool" => &["stride", "pad", "dilation", "count_include_pad"],
        "pad" => &["value"],
        "concat" => &["axis"],
        "softmax" | "log_softmax" => &["axis"],
        "reduce_sum" | "reduce_mean" | "reduce_max" => &["axes", "keepdims"],
        "split" => &["axis", "sizes"],
        "gather" => &["axis"],
        "pow" | "equal" | "less" | "greater" | "less_equal" | "greater_equal" | "nonzero"
        | "range" => &[],
        "slice" => &["starts", "ends", "axes", "steps"],
        "squeeze" | "unsqueeze" => &["axes"],
        _ => &[],
    }
}

/// One size, or `n` of them (2 or 3 while `n` is unknown), as `2x2` or `(2, 1)`.
fn sizes_of(cx: &mut Builder, v: &Value, op: &str, n: Option<usize>) -> Option<Vec<usize>> {
    let fits = |len: usize| n.map_or((2..=3).contains(&len), |n| n > 1 && len == n);
    match v {
        Value::Int(n) => Some(vec![n.value]),
        Value::Dims(d, _) if fits(d.len()) => Some(d.iter().map(|d| d.value).collect()),
        Value::Tuple(items, _) if fits(items.len()) => {
            items.iter().map(|i| int_of(cx, i, op)).collect()
        }
        other => {
            let msg = match n {
                Some(1) => format!("{op} must be one size, like `2`"),
                Some(2) => format!("{op} must be one size or two, like `2`, `2x2` or `(2, 1)`"),
                Some(_) => {
                    format!("{op} must be one size or three, like `2`, `2x2x2` or `(1, 2, 2)`")
                }
                None => format!(
                    "{op} must be one size or one per spatial dimension, like `2`, `2x2` or `(1, 2, 2)`"
                ),
            };
            cx.error(other.span(), msg);
            None
        }
    }
}

/// What `pad = ...` may be for an op of spatial rank `n` (the 2-D text is the original one).
fn pad_message(op: &str, n: Option<usize>) -> String {
    match n {
        Some(1) => format!("{op}: expected padding: `same`, `valid`, `1` or `(begin, end)`"),
        Some(2) => {
            "expected padding: `same`, `valid`, `1`, `(h, w)` or `(top, left, bottom, right)`"
                .to_string()
        }
        Some(_) => format!(
            "{op}: expected padding: `same`, `valid`, `1`, `(d, h, w)` or `(d0, h0, w0, d1, h1, w1)`"
        ),
        None => format!(
            "{op}: expected padding: `same`, `valid`, one number, one per spatial dimension, or a begin and an end for each"
        ),
    }
}

pub(super) fn pads_of(cx: &mut Builder, v: &Value) -> Option<[usize; 4]> {
    let ints = |cx: &mut Builder, items: &[Value]| -> Option<Vec<usize>> {
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

fn int_of(cx: &mut Builder, v: &Value, op: &str) -> Option<usize> {
    match v {
        Value::Int(Num { value, .. }) => Some(*value),
        other => {
            cx.error(other.span(), format!("{op}: expected a whole number"));
            None
        }
    }
}
