//! Graph rewrites before planning: batch norms folded into the conv or dense that feeds them,
//! activations fused into their producer's epilogue, and dead ops removed.
//!
//! A fold is only legal when the producer's result has no other reader (and is not an
//! output): folding changes the producer's result, so a second reader would see the wrong
//! values. The rewrite builds a new graph rather than editing ids in place, so every id in the
//! result still points backwards.

use crate::ir::{Act, Graph, OpKind, Producer, ValueId};

pub fn fuse(g: &Graph) -> Graph {
    let mut uses = g.use_counts();
    let mut kinds: Vec<OpKind> = g.ops.iter().map(|op| op.kind.clone()).collect();
    let mut dropped = vec![false; g.ops.len()];
    // `subst[v]` is the value that now stands for `v` (itself unless `v`'s op was folded away).
    let mut subst: Vec<ValueId> = (0..g.values.len() as u32).map(ValueId).collect();

    for (i, op) in g.ops.iter().enumerate() {
        let Some(&arg) = op.args.first() else {
            continue;
        };
        let x = subst[arg.index()];
        let Producer::Op(p) = g.values[x.index()].producer else {
            continue;
        };
        if uses[x.index()] != 1 || dropped[p.index()] {
            continue;
        }
        let folded = match (&op.kind, &mut kinds[p.index()]) {
            (
                OpKind::BatchNorm { bn, act: Act::None },
                OpKind::Conv2d {
                    bn: slot @ None,
                    act: Act::None,
                    ..
                }
                | OpKind::Dense {
                    bn: slot @ None,
                    act: Act::None,
                    ..
                },
            ) => {
                *slot = Some(*bn);
                true
            }
            (
                OpKind::Unary(act),
                OpKind::Conv2d {
                    act: slot @ Act::None,
                    ..
                }
                | OpKind::Dense {
                    act: slot @ Act::None,
                    ..
                }
                | OpKind::BatchNorm {
                    act: slot @ Act::None,
                    ..
                },
            ) => {
                *slot = *act;
                true
            }
            _ => false,
        };
        if folded {
            dropped[i] = true;
            subst[op.result.index()] = x;
            uses[x.index()] = uses[op.result.index()];
        }
    }

    // Dead-code elimination: keep the ops that outputs (transitively) read.
    let mut needed = vec![false; g.values.len()];
    for o in &g.outputs {
        needed[subst[o.value.index()].index()] = true;
    }
    for (i, op) in g.ops.iter().enumerate().rev() {
        if !dropped[i] && needed[op.result.index()] {
            for a in &op.args {
                needed[subst[a.index()].index()] = true;
            }
        }
    }

    let mut out = Graph {
        params: g.params.clone(),
        ..Graph::default()
    };
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    for (i, input) in g.inputs.iter().enumerate() {
        let v = out.add_value(Producer::Input(i), g.shape(input.value).clone(), input.span);
        out.values[v.index()].name = g.values[input.value.index()].name.clone();
        map[input.value.index()] = Some(v);
        out.inputs.push(crate::ir::Input {
            value: v,
            ..input.clone()
        });
    }
    for (i, op) in g.ops.iter().enumerate() {
        if dropped[i] || !needed[op.result.index()] {
            continue;
        }
        let args = op
            .args
            .iter()
            .map(|a| map[subst[a.index()].index()].expect("args are defined before use"))
            .collect();
        let v = out.add_op(kinds[i].clone(), args, g.shape(op.result).clone(), op.span);
        map[op.result.index()] = Some(v);
        out.values[v.index()].name = g.values[op.result.index()].name.clone();
    }
    // A folded op's result takes the user's name of the value that replaced it (`let a =
    // batch_norm(a, ...)` names the conv's result), which reads best in printed plans.
    for (old, new) in subst.iter().enumerate() {
        if old != new.index() {
            if let (Some(v), Some(name)) = (map[new.index()], &g.values[old].name) {
                out.values[v.index()].name = Some(name.clone());
            }
        }
    }
    out.outputs = g
        .outputs
        .iter()
        .map(|o| crate::ir::Output {
            value: map[subst[o.value.index()].index()].expect("outputs are defined"),
            ty_span: o.ty_span,
        })
        .collect();
    out
}
