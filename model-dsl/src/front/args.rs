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

    pub fn positional_pair(&mut self, cx: &mut Builder, what: &str) -> Option<[usize; 2]> {
        match self.take_positional() {
            Some(v) => pair_of(cx, &v, &format!("{}: the window", self.op)),
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

    pub fn pair(&mut self, cx: &mut Builder, name: &str) -> Option<Option<[usize; 2]>> {
        match self.named(name) {
            None => Some(None),
            Some(v) => pair_of(cx, v, &format!("{}: `{name}`", self.op)).map(Some),
        }
    }

    pub fn padding(&mut self, cx: &mut Builder) -> Option<Padding> {
        match self.named("pad") {
            None => Some(Padding::Explicit([0; 4])),
            Some(Value::Expr(Expr::Name(i))) if i == "same" => Some(Padding::Same),
            Some(Value::Expr(Expr::Name(i))) if i == "valid" => Some(Padding::Explicit([0; 4])),
            Some(v) => pads_of(cx, v).map(Padding::Explicit),
        }
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
        "conv2d" => &["stride", "pad", "dilation", "groups", "bias"],
        "dense" => &["bias"],
        "batch_norm" => &["eps"],
        "clip" => &["min", "max"],
        "leaky_relu" => &["alpha"],
        "max_pool" => &["stride", "pad"],
        "avg_pool" => &["stride", "pad", "count_include_pad"],
        "pad" => &["value"],
        "concat" => &["axis"],
        "softmax" | "log_softmax" => &["axis"],
        "reduce_sum" | "reduce_mean" | "reduce_max" => &["axes", "keepdims"],
        "split" => &["axis", "sizes"],
        "gather" => &["axis"],
        "slice" => &["starts", "ends", "axes", "steps"],
        "squeeze" | "unsqueeze" => &["axes"],
        _ => &[],
    }
}

fn pair_of(cx: &mut Builder, v: &Value, op: &str) -> Option<[usize; 2]> {
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
