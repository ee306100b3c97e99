//! Graph rewrites before planning, on the typed graph: batch norms folded into the conv or
//! dense that feeds them, residual `add`s fused into the conv that feeds them, activations
//! fused into their producer's epilogue, and dead ops removed.
//!
//! A fold is only legal when the producer's result has no other reader (and is not an
//! output): folding changes the producer's result, so a second reader would see the wrong
//! values. A folded batch norm's four statistics become extra arguments of the conv/dense
//! (parameters are values), and the loader folds them into its weights. The rewrite builds a
//! new graph rather than editing ids in place, so every id in the result still points
//! backwards; the IR verifier re-checks that afterwards.
//!
//! **Residuals** (ResNet's `relu(add(conv(x), r))`, MobileNet-v2's `add(conv(x), r)`): the
//! `add` becomes the conv with `r` as a last argument, which the kernel adds in its GEMM
//! epilogue after the bias and before the activation ([`residual_conv`] has the rule). The
//! fused op takes the `add`'s place in the order, where `r` is certainly computed; the conv's
//! own inputs were ready earlier still. The residual is an ordinary read: the result is a new
//! buffer, never `r`'s bytes (the kernel reads `r` while it writes the result), so the planner
//! and its verifier need no new rule.

use crate::contract::ConvAlgo;
use crate::ir::{Act, BinOp, DType, Graph, Op, OpKind, Output, Producer, ValueId};

/// Which algorithm a 2-D convolution runs on (`layout::conv_algo`, handed in by the driver:
/// `layout` is a pass beside this one, not below it).
pub type AlgoOf<'a> = &'a dyn Fn(&Graph, &Op) -> Option<ConvAlgo>;

pub fn fuse(g: &Graph, algo: AlgoOf<'_>) -> Graph {
    let mut uses = g.use_counts();
    let mut kinds: Vec<OpKind> = g.ops.iter().map(|op| op.kind.clone()).collect();
    let mut args: Vec<Vec<ValueId>> = g.ops.iter().map(|op| op.args.clone()).collect();
    let mut dropped = vec![false; g.ops.len()];
    // `subst[v]` is the value that now stands for `v` (itself unless `v`'s op was folded away).
    let mut subst: Vec<ValueId> = (0..g.values.len() as u32).map(ValueId).collect();

    // The op whose location (name token, argument locations, declaration) the kept op `i`
    // carries: its own, or, for an `add` that became a conv, the conv's.
    let mut origin: Vec<usize> = (0..g.ops.len()).collect();

    for (i, op) in g.ops.iter().enumerate() {
        if let Some((p, r)) = residual_conv(g, op, &subst, &uses, &dropped, &kinds, algo) {
            let OpKind::Conv { residual, .. } = &mut kinds[p] else {
                unreachable!("residual_conv returns convolutions")
            };
            *residual = true;
            kinds[i] = kinds[p].clone();
            let mut conv_args = std::mem::take(&mut args[p]);
            conv_args.push(r);
            args[i] = conv_args;
            dropped[p] = true;
            origin[i] = p;
            continue;
        }
        let Some(&arg) = op.args.first() else {
            continue;
        };
        let x = subst[arg.index()];
        let Producer::Op { op: p, .. } = g.values[x.index()].producer else {
            continue;
        };
        if uses[x.index()] != 1 || dropped[p.index()] || g.op(p).results.len() != 1 {
            continue;
        }
        let folded = match (&op.kind, &mut kinds[p.index()]) {
            (
                OpKind::BatchNorm {
                    eps,
                    act: Act::None,
                },
                // Not after a residual: the batch norm would apply to the sum.
                OpKind::Conv {
                    bn: slot @ None,
                    residual: false,
                    act: Act::None,
                    ..
                }
                | OpKind::Dense {
                    bn: slot @ None,
                    act: Act::None,
                    ..
                },
            ) => {
                *slot = Some(*eps);
                args[p.index()].extend_from_slice(&op.args[1..]);
                true
            }
            (
                OpKind::Unary(act),
                OpKind::Conv {
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
            subst[op.result().index()] = x;
            uses[x.index()] = uses[op.result().index()];
        }
    }

    // Dead-code elimination: keep the ops that outputs (transitively) read.
    let mut needed = vec![false; g.values.len()];
    for o in &g.outputs {
        needed[subst[o.value.index()].index()] = true;
    }
    let mut live = vec![false; g.ops.len()];
    for (i, op) in g.ops.iter().enumerate().rev() {
        if !dropped[i] && op.results.iter().any(|r| needed[r.index()]) {
            live[i] = true;
            for a in &args[i] {
                needed[subst[a.index()].index()] = true;
            }
        }
    }

    // Rebuild: inputs and parameters first (a folded batch norm's statistics were declared
    // after the conv that now reads them), then the kept ops in order.
    let mut out = Graph {
        inputs: g.inputs.clone(),
        symbols: g.symbols.clone(),
        bindings: g.bindings.clone(),
        ..Graph::default()
    };
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    for (i, v) in g.values.iter().enumerate() {
        let nv = match v.producer {
            Producer::Input(k) => {
                let nv = out.add_value(Producer::Input(k), v.loc);
                out.inputs[k].value = nv;
                nv
            }
            Producer::Param(p) => {
                let param = &g.params[p.index()];
                out.add_param(
                    param.key.clone(),
                    param.shape.clone(),
                    param.name_loc,
                    param.ty_loc,
                )
            }
            Producer::Op { .. } => continue,
        };
        out.values[nv.index()].name = v.name.clone();
        map[i] = Some(nv);
    }
    for (i, o) in g.ops.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let new_args = args[i]
            .iter()
            .map(|a| map[subst[a.index()].index()].expect("args are defined before use"))
            .collect();
        let from = &g.ops[origin[i]];
        let results = out.add_op(
            kinds[i].clone(),
            new_args,
            o.results.len(),
            from.loc,
            from.arg_locs.clone(),
            from.decl,
        );
        if let Some(op) = out.ops.last_mut() {
            op.in_place = o.in_place;
        }
        for (old, new) in o.results.iter().zip(results) {
            out.values[new.index()].name = g.values[old.index()].name.clone();
            map[old.index()] = Some(new);
        }
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
    let mut types = vec![None; out.values.len()];
    for (old, new) in map.iter().enumerate() {
        if let Some(new) = new {
            types[new.index()] = Some(g.types[old].clone());
        }
    }
    out.types = types
        .into_iter()
        .map(|t| t.expect("every kept value comes from a typed one"))
        .collect();
    // Sequences name their elements' values: renumber them like everything else.
    let mut seqs = vec![None; out.values.len()];
    for (old, new) in map.iter().enumerate() {
        if let (Some(new), Some(s)) = (new, g.seq(ValueId(old as u32))) {
            let mut s = s.clone();
            for e in &mut s.elems {
                e.base = map[subst[e.base.index()].index()]
                    .expect("elements are kept with their sequence");
            }
            seqs[new.index()] = Some(s);
        }
    }
    out.seqs = seqs;
    out.outputs = g
        .outputs
        .iter()
        .map(|o| Output {
            value: map[subst[o.value.index()].index()].expect("outputs are defined"),
            ..o.clone()
        })
        .collect();
    out
}

/// If op `add` is an `add` that can become the convolution feeding it with the other operand as
/// its residual: that conv's op index and the residual. The rule:
///
/// * `add` is `Binary(Add)` of two f32 values of the result's shape (no broadcasting), not
///   declared in place (`add_`: its result must be its first argument's bytes);
/// * one operand is the result of a 2-D convolution (after any folds so far) that has no
///   activation and no residual yet, and has no other reader and is not an output (the
///   fold rule); if both are, the later one, so the other is certainly computed;
/// * the convolution runs on a GEMM (pointwise or im2col): the GEMM epilogue is where the
///   residual is added while the tile is in registers. Winograd's output transform and the
///   depthwise kernels have no residual epilogue, so those convolutions keep their `add`.
fn residual_conv(
    g: &Graph,
    add: &Op,
    subst: &[ValueId],
    uses: &[usize],
    dropped: &[bool],
    kinds: &[OpKind],
    algo: AlgoOf<'_>,
) -> Option<(usize, ValueId)> {
    if add.kind != OpKind::Binary(BinOp::Add) || add.in_place || add.args.len() != 2 {
        return None;
    }
    let y = g.shape(add.result());
    let operands = [add.args[0], add.args[1]].map(|a| subst[a.index()]);
    if y.dtype != DType::F32 || operands.iter().any(|&a| g.shape(a) != y) {
        return None;
    }
    let conv_of = |v: ValueId| {
        let Producer::Op { op: p, .. } = g.values[v.index()].producer else {
            return None;
        };
        let fits = matches!(
            kinds[p.index()],
            OpKind::Conv {
                act: Act::None,
                residual: false,
                ref kernel,
                ..
            } if kernel.len() == 2
        ) && uses[v.index()] == 1
            && !dropped[p.index()]
            && g.op(p).results.len() == 1
            && matches!(
                algo(g, g.op(p)),
                Some(ConvAlgo::Pointwise | ConvAlgo::Im2col)
            );
        fits.then_some(p.index())
    };
    let [a, b] = operands;
    match (conv_of(a), conv_of(b)) {
        (Some(pa), Some(pb)) if pb > pa => Some((pb, a)),
        (Some(pa), _) => Some((pa, b)),
        (None, Some(pb)) => Some((pb, a)),
        (None, None) => None,
    }
}
