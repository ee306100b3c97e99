//! Proofs for declared in-place ops (`x.relu_()`, `add_(x, y)`): the result *is* `x`'s buffer,
//! so writing it must not change anything another part of the network still reads. TVM's
//! DeclBuffer validator rejects aliases that do not fit their buffer (inference checks a
//! declared `view` that way); this pass rejects in-place writes that would be use-after-free
//! or aliasing bugs in C, each with a second error at the other place involved:
//!
//! * the buffer is a model input or the weights (read-only, outside the arena);
//! * the argument is a view inside a larger buffer (a `view`, a sequence element), whose
//!   bytes are not a buffer of their own;
//! * the buffer (through `x` or any view of it made before the write) is read by a later op
//!   or returned;
//! * a sequence made before the write holds the buffer and is used after it.
//!
//! What passes is exactly what the planner's in-place rule accepts (the buffer dies at the
//! op), and the driver checks after planning that the planner did put the result there.

use crate::diag::{Errors, Loc};
use crate::ir::{Act, Graph, OpKind, Producer, ValueId};

/// Checks every declared in-place op of the typed graph `g`, reporting to `errors`.
pub fn check(g: &Graph, errors: &mut Errors) {
    for (d, op) in g.ops.iter().enumerate() {
        if !op.in_place {
            continue;
        }
        let name = match &op.kind {
            OpKind::Unary(act) => act_name(*act),
            k => k.name(),
        };
        let x = op.args[0];
        let xname = name_of(g, x);
        let root = g.alias_root(x);
        let mut fail = |here: Loc, msg: String, there: Loc, note: String| {
            errors.push(here, msg);
            errors.push(there, note);
        };
        // Only elementwise ops whose result has `x`'s shape can overwrite it.
        let elementwise = match op.kind {
            OpKind::Unary(_) => true,
            OpKind::Binary(_) => {
                let out = g.shape(op.result());
                crate::layout::table_binary(out) && op.args[1] != x
            }
            _ => false,
        };
        if !elementwise || g.shape(op.result()) != g.shape(x) {
            errors.push(op.loc, format!("{name}_: the result {} cannot be written over `{xname}` ({}): in place needs an elementwise op on f32 (rank at most 4 for arithmetic) whose result has the first argument's shape, and two different arguments", g.shape(op.result()), g.shape(x)));
            continue;
        }
        match g.values[root.index()].producer {
            Producer::Input(k) => {
                let input = &g.inputs[k];
                fail(op.loc, format!("{name}_: would write over `{xname}`, which is the model input `{}`; inputs are read-only (write the result to a new value with `{name}(...)`)", input.name), input.loc, format!("the input `{}` that `{name}_` would overwrite is declared here", input.name));
                continue;
            }
            Producer::Param(p) => {
                let param = &g.params[p.index()];
                fail(op.loc, format!("{name}_: would write over `{xname}`, which is the weights tensor `{}`; weights are read-only", param.key), param.name_loc, format!("the weights `{}` that `{name}_` would overwrite are declared here", param.key));
                continue;
            }
            Producer::Op { .. } => {}
        }
        if let Some(view) = g
            .producer_op(x)
            .filter(|p| matches!(p.kind, OpKind::View { .. }) || g.seq_view(x).is_some())
        {
            fail(op.loc, format!("{name}_: `{xname}` is a view inside a larger buffer; write in place over the buffer itself"), view.loc, format!("`{xname}` is made a view here"));
            continue;
        }
        let before = |v: ValueId| match g.values[v.index()].producer {
            Producer::Op { op, .. } => op.index() < d,
            _ => true,
        };
        let shares = |v: ValueId| g.alias_root(v) == root && before(v);
        // A later reader of the buffer (through `x` or an older view of it).
        let later = g.ops[d + 1..].iter().find_map(|o| {
            o.args
                .iter()
                .position(|&a| shares(a) && g.seq(a).is_none())
                .map(|k| (o, k))
        });
        if let Some((o, k)) = later {
            let other = name_of(g, o.args[k]);
            fail(op.loc, format!("{name}_: writes over `{xname}` in place, but `{other}` (the same bytes) is read again later, by `{}`", o.kind.name()), o.arg_loc(k), format!("`{other}` is read here, after `{name}_` overwrote it"));
            continue;
        }
        if let Some(o) = g.outputs.iter().find(|o| !o.seq && shares(o.value)) {
            fail(op.loc, format!("{name}_: writes over `{xname}` in place, but the network returns `{}` (the same bytes)", name_of(g, o.value)), o.ty_loc, format!("`{}` is returned here, after `{name}_` overwrote it", name_of(g, o.value)));
            continue;
        }
        // A sequence that holds the buffer and is still used after the write.
        let held = g.values.iter().enumerate().find_map(|(i, _)| {
            let s = ValueId(i as u32);
            let seq = g.seq(s)?;
            let holds = before(s) && seq.elems.iter().any(|e| g.alias_root(e.base) == root);
            let used = g.ops[d + 1..].iter().any(|o| o.args.contains(&s))
                || g.outputs.iter().any(|o| o.value == s);
            (holds && used).then_some(s)
        });
        if let Some(s) = held {
            let at = g.producer_op(s).map_or(op.loc, |o| o.loc);
            fail(op.loc, format!("{name}_: writes over `{xname}` in place, but the sequence `{}` holds it and is used later", name_of(g, s)), at, format!("the sequence `{}` takes `{xname}` here", name_of(g, s)));
        }
    }
}

/// The DSL's name of an activation (`relu6` is a clip).
fn act_name(act: Act) -> &'static str {
    match act {
        Act::Relu => "relu",
        Act::Clip { .. } => "clip",
        Act::LeakyRelu { .. } => "leaky_relu",
        Act::Sigmoid => "sigmoid",
        Act::Tanh => "tanh",
        Act::None => "activation",
    }
}

fn name_of(g: &Graph, v: ValueId) -> String {
    match (&g.values[v.index()].name, g.values[v.index()].producer) {
        (Some(n), _) => n.clone(),
        (None, Producer::Param(p)) => g.params[p.index()].key.clone(),
        (None, Producer::Op { op, .. }) => format!("the {} result", g.op(op).kind.name()),
        (None, _) => format!("%{}", v.0),
    }
}
