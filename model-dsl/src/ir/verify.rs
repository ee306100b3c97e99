//! The IR verifier: structural invariants of a [`Graph`], checked after the passes that can
//! break them (inference, fusion). A failure is a compiler bug, reported as an internal error
//! with the printed IR, never as the user's mistake (cranelift's `verifier`, naga's
//! `handles.rs`).
//!
//! Checked: ids in range and pointing backwards; every value produced exactly where its
//! `producer` says; each op's argument and result counts; parameters of conv/dense/batch norm
//! are parameter values (they live in the parameter buffer); and, for a typed graph, a type
//! for every value, no unresolved padding, aliases no larger than what they view, and a
//! consistent sequence table (sequences hold earlier values; sequence ops read sequences).

use super::{Graph, OpKind, Padding, Producer, ValueId};

/// `Ok` or the first broken invariant.
pub fn verify(g: &Graph) -> Result<(), String> {
    let n = g.values.len();
    let in_range = |v: ValueId| v.index() < n;
    for (i, v) in g.values.iter().enumerate() {
        let id = ValueId(i as u32);
        let ok = match v.producer {
            Producer::Input(k) => g.inputs.get(k).is_some_and(|x| x.value == id),
            Producer::Param(p) => g.params.get(p.index()).is_some_and(|x| x.value == id),
            Producer::Op { op, slot } => g
                .ops
                .get(op.index())
                .and_then(|o| o.results.get(slot as usize))
                .is_some_and(|r| *r == id),
        };
        if !ok {
            return Err(format!(
                "%{i}: its producer {:?} does not list it",
                v.producer
            ));
        }
    }
    for (i, op) in g.ops.iter().enumerate() {
        let name = op.kind.name();
        let (args, results) = op.kind.arity();
        let variadic_empty = args.is_none() && op.args.is_empty();
        if args.is_some_and(|a| a != op.args.len()) || variadic_empty {
            return Err(format!(
                "op {i} ({name}): {} arguments, expected {args:?}",
                op.args.len()
            ));
        }
        if op.results.len() != results {
            return Err(format!(
                "op {i} ({name}): {} results, expected {results}",
                op.results.len()
            ));
        }
        let first = op.results.iter().min().copied();
        for a in &op.args {
            if !in_range(*a) || first.is_some_and(|f| *a >= f) {
                return Err(format!(
                    "op {i} ({name}): argument %{} is not defined before it",
                    a.0
                ));
            }
        }
        for a in op.param_args() {
            if !matches!(g.values[a.index()].producer, Producer::Param(_)) {
                return Err(format!(
                    "op {i} ({name}): argument %{} should be a parameter",
                    a.0
                ));
            }
        }
    }
    for o in &g.outputs {
        if !in_range(o.value) {
            return Err(format!("output %{} does not exist", o.value.0));
        }
    }
    if !g.types.is_empty() {
        if g.types.len() != n {
            return Err(format!("{} types for {n} values", g.types.len()));
        }
        // Sequences: none (an empty table), or one entry per value; elements are earlier values
        // (or, for a copying `split_to_seq`, the sequence's own buffer); sequence ops read
        // sequences.
        if !g.seqs.is_empty() && g.seqs.len() != n {
            return Err(format!("{} sequence entries for {n} values", g.seqs.len()));
        }
        for (i, s) in g.seqs.iter().enumerate() {
            let Some(s) = s else { continue };
            if let Some(e) = s.elems.iter().find(|e| e.base.index() > i) {
                return Err(format!("sequence %{i} holds %{}, a later value", e.base.0));
            }
            // A run-time sequence holds copies in its own buffer, never graph values: the escape
            // rule has nothing to track for it.
            if s.run.is_some() && (!s.elems.is_empty() || s.run_order) {
                return Err(format!(
                    "run-time sequence %{i} lists graph values as elements"
                ));
            }
            if !s.run_order && s.run.is_none() && s.elems.len() != s.len {
                return Err(format!(
                    "sequence %{i} has {} elements but length {}",
                    s.elems.len(),
                    s.len
                ));
            }
        }
        for (i, op) in g.ops.iter().enumerate() {
            let reads_seq = matches!(
                op.kind,
                OpKind::SeqInsert { .. }
                    | OpKind::SeqErase { .. }
                    | OpKind::SeqAt { .. }
                    | OpKind::SeqLen
                    | OpKind::ConcatFromSeq { .. }
            );
            if reads_seq && g.seq(op.args[0]).is_none() {
                return Err(format!(
                    "op {i} ({}): its first argument is not a sequence",
                    op.kind.name()
                ));
            }
        }
        for (i, op) in g.ops.iter().enumerate() {
            let name = op.kind.name();
            match &op.kind {
                OpKind::Conv {
                    pad: Padding::Same | Padding::Written(_),
                    ..
                }
                | OpKind::ConvTranspose {
                    pad: Padding::Same | Padding::Written(_),
                    ..
                }
                | OpKind::Pool {
                    pad: Padding::Same | Padding::Written(_),
                    ..
                } => return Err(format!("op {i} ({name}): padding left unresolved")),
                OpKind::Conv {
                    kernel,
                    stride,
                    dilation,
                    pad: Padding::Explicit(pad),
                    ..
                } => window_ranks(g, op, i, kernel, stride, dilation, pad)?,
                OpKind::Pool {
                    kernel,
                    stride,
                    dilation,
                    pad: Padding::Explicit(pad),
                    ..
                } => window_ranks(g, op, i, kernel, stride, dilation, pad)?,
                OpKind::ConvTranspose {
                    kernel,
                    stride,
                    dilation,
                    pad: Padding::Explicit(pad),
                    output_padding,
                    ..
                } => {
                    window_ranks(g, op, i, kernel, stride, dilation, pad)?;
                    if output_padding.len() != kernel.len() {
                        return Err(format!("op {i} ({name}): output_padding {output_padding:?} does not fit the kernel {kernel:?}"));
                    }
                }
                OpKind::Reshape(_) => {
                    let (x, y) = (g.shape(op.args[0]), g.shape(op.result()));
                    if y.bytes() > x.bytes() {
                        return Err(format!(
                            "op {i} ({name}): the alias ({} bytes) does not fit its source ({} bytes)",
                            y.bytes(),
                            x.bytes()
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// A typed window op has one kernel size, stride and dilation per spatial dimension of its
/// input (1 to 3 of them) and a begin and an end padding for each.
fn window_ranks(
    g: &Graph,
    op: &crate::ir::Op,
    i: usize,
    kernel: &[usize],
    stride: &[usize],
    dilation: &[usize],
    pad: &[usize],
) -> Result<(), String> {
    let n = g.shape(op.args[0]).rank().wrapping_sub(2);
    let ok = (1..=3).contains(&n)
        && kernel.len() == n
        && stride.len() == n
        && dilation.len() == n
        && pad.len() == 2 * n;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "op {i} ({}): kernel {kernel:?}, stride {stride:?}, dilation {dilation:?} and padding {pad:?} do not fit {n} spatial dimensions",
            op.kind.name()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diag::Loc;
    use crate::ir::{Act, DType, Shape};

    fn relu_graph() -> Graph {
        let mut g = Graph::default();
        let x = g.add_value(Producer::Input(0), Loc(0));
        g.inputs.push(crate::ir::Input {
            name: "x".into(),
            value: x,
            ty: crate::ir::TensorType {
                dtype: DType::F32,
                dims: vec![],
                kind: crate::ir::Kind::Tensor,
            },
            loc: Loc(0),
        });
        g.add_op(OpKind::Unary(Act::Relu), vec![x], 1, Loc(0), vec![], None);
        g
    }

    #[test]
    fn accepts_a_well_formed_graph() {
        assert_eq!(verify(&relu_graph()), Ok(()));
    }

    /// A run-time sequence holds copies, never graph values (what lets the plan and its
    /// verifier ignore it): one that lists an element is refused.
    #[test]
    fn run_time_sequences_hold_no_graph_values() {
        let mut g = relu_graph();
        let kind = OpKind::SeqInput {
            slot: 0,
            name: "s".into(),
            dtype: DType::F32,
            dims: vec![None],
        };
        let s = g.add_op(kind, vec![], 1, Loc(0), vec![], None)[0];
        g.types = vec![Shape::tensor(DType::F32, vec![]); 3];
        let run = crate::ir::SeqVal {
            dtype: DType::F32,
            elems: vec![],
            len: 0,
            run_order: false,
            run: Some(vec![None]),
        };
        g.seqs = vec![None, None, Some(run)];
        assert_eq!(verify(&g), Ok(()));
        if let Some(r) = &mut g.seqs[s.index()] {
            r.elems.push(crate::ir::Elem {
                base: ValueId(1),
                offset: 0,
                shape: Shape::tensor(DType::F32, vec![]),
            });
        }
        assert!(verify(&g).unwrap_err().contains("lists graph values"));
    }

    #[test]
    fn rejects_forward_references() {
        let mut g = relu_graph();
        g.ops[0].args[0] = ValueId(1);
        assert!(verify(&g).unwrap_err().contains("not defined before"));
    }

    #[test]
    fn rejects_wrong_arity() {
        let mut g = relu_graph();
        g.ops[0].args.push(ValueId(0));
        assert!(verify(&g).unwrap_err().contains("arguments"));
    }

    #[test]
    fn rejects_missing_types_and_unresolved_padding() {
        let mut g = relu_graph();
        g.types = vec![Shape::tensor(DType::F32, vec![2])];
        assert!(verify(&g).unwrap_err().contains("types"));
        g.types.push(Shape::tensor(DType::F32, vec![2]));
        assert_eq!(verify(&g), Ok(()));
        g.ops[0].kind = OpKind::Pool {
            kind: crate::ir::PoolKind::Max,
            kernel: vec![2, 2],
            stride: vec![2, 2],
            dilation: vec![1, 1],
            pad: Padding::Same,
            count_include_pad: false,
        };
        assert!(verify(&g).unwrap_err().contains("unresolved"));
    }
}
