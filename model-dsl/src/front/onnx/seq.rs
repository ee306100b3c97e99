//! The ONNX sequence operators, mapped one to one onto the IR's sequence ops (the DSL's
//! `seq_empty`, `seq_construct`, `insert`, `erase`, `at`, `len`, `split_to_seq`,
//! `concat_from_seq`), so inference, the planner's escape rule and codegen are the ones the DSL
//! uses: nothing here has semantics of its own.
//!
//! A position (`SequenceInsert`/`SequenceErase`/`SequenceAt`'s last input) is either a
//! compile-time constant (an initializer or a `Constant`: [`Pos::Static`], checked by inference
//! against the sequence's length, the error naming the node) or a graph value (an `i64` model
//! input: [`Pos::Run`], checked at run time, `Err(SeqPosition)`). `SplitToSequence`'s `split` is
//! the same: a constant scalar (a chunk size) or 1-D tensor (the sizes), or a run-time `i64`
//! tensor (sizes checked at run time; then only `SequenceLength` may read the sequence).
//!
//! Sequence-typed graph inputs and outputs (`type.sequence_type`) are handled by the importer's
//! input and output code with [`Importer::seq_input`]: ONNX does not say how many elements an
//! input sequence has, so the caller gives it ([`super::Options::seq_lens`]).

use super::{dtype_of, elem_name, Const, Importer, R, V};
use crate::diag::Loc;
use crate::front::onnx_proto as pb;
use crate::ir::{Input, OpKind, Pos, Producer, SeqSplit, TensorType, ValueId};

/// The sequence operators this module maps (the importer's list of supported operators
/// includes them).
pub const OPS: &[&str] = &[
    "ConcatFromSequence",
    "SequenceAt",
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceErase",
    "SequenceInsert",
    "SequenceLength",
    "SplitToSequence",
];

impl Importer<'_, '_> {
    /// One sequence node: its single output.
    pub(super) fn seq_node(&mut self, node: &pb::NodeProto, at: Loc) -> R<Vec<V>> {
        let (kind, args) = match node.op_type() {
            "SequenceEmpty" => {
                // ONNX's default element type is float.
                let elem = Self::attr(node, "dtype").map_or(1, |a| a.i() as i32);
                let dt = dtype_of(elem)
                    .ok_or_else(|| format!("sequences of {} are not supported", elem_name(elem)))?;
                (OpKind::SeqEmpty(dt), vec![])
            }
            "SequenceConstruct" => {
                if node.input.is_empty() {
                    return Err("SequenceConstruct needs at least one tensor".into());
                }
                let args = (0..node.input.len())
                    .map(|i| self.graph_arg(node, i))
                    .collect::<R<Vec<_>>>()?;
                (OpKind::SeqConstruct, args)
            }
            "SequenceInsert" => {
                let mut args = vec![self.seq_arg(node, 0)?, self.graph_arg(node, 1)?];
                let at = self.position(node, 2, &mut args)?;
                (OpKind::SeqInsert { at }, args)
            }
            "SequenceErase" => {
                let mut args = vec![self.seq_arg(node, 0)?];
                let at = self.position(node, 1, &mut args)?;
                (OpKind::SeqErase { at }, args)
            }
            "SequenceAt" => {
                let mut args = vec![self.seq_arg(node, 0)?];
                let at = self.position(node, 1, &mut args)?;
                if at == Pos::Default {
                    return Err("SequenceAt needs the position (input 2)".into());
                }
                (OpKind::SeqAt { at }, args)
            }
            "SequenceLength" => (OpKind::SeqLen, vec![self.seq_arg(node, 0)?]),
            "SplitToSequence" => {
                let mut args = vec![self.graph_arg(node, 0)?];
                let split = match self.arg(node, 1)? {
                    None => SeqSplit::Ones,
                    Some(V::C(c)) => const_split(&c)?,
                    Some(v @ V::G(_)) => {
                        args.push(self.g(&v, &Self::name_of(node, 1))?);
                        SeqSplit::Run
                    }
                };
                let kind = OpKind::SplitToSeq {
                    axis: Self::attr_i(node, "axis", 0),
                    split,
                    keepdims: Self::attr_i(node, "keepdims", 1) != 0,
                };
                (kind, args)
            }
            "ConcatFromSequence" => {
                let axis = Self::attr(node, "axis")
                    .map(|a| a.i())
                    .ok_or("ConcatFromSequence needs its `axis` attribute")?;
                let kind = OpKind::ConcatFromSeq {
                    axis,
                    new_axis: Self::attr_i(node, "new_axis", 0) != 0,
                };
                (kind, vec![self.seq_arg(node, 0)?])
            }
            other => return Err(format!("internal: `{other}` is no sequence operator")),
        };
        // Every message of the shape rules is at this node (a position's too).
        let locs = vec![at; args.len()];
        let out = self.graph.add_op(kind, args, 1, at, locs, Some(at))[0];
        Ok(vec![V::G(out)])
    }

    /// Input `i` as a graph value (constants are materialized as for any run-time op).
    fn graph_arg(&mut self, node: &pb::NodeProto, i: usize) -> R<ValueId> {
        let v = self.need(node, i)?;
        self.g(&v, &Self::name_of(node, i))
    }

    /// Input `i`, which must be a sequence the graph computes (a constant never is one).
    fn seq_arg(&mut self, node: &pb::NodeProto, i: usize) -> R<ValueId> {
        match self.need(node, i)? {
            V::G(id) => Ok(id),
            V::C(_) => Err(format!(
                "input {} (`{}`) must be a sequence, but it is a constant tensor",
                i + 1,
                Self::name_of(node, i)
            )),
        }
    }

    /// The optional position input `i`: absent (the op's default), a constant (checked at
    /// compile time), or a run-time value (appended to `args`, checked at run time).
    fn position(&mut self, node: &pb::NodeProto, i: usize, args: &mut Vec<ValueId>) -> R<Pos> {
        match self.arg(node, i)? {
            None => Ok(Pos::Default),
            Some(V::C(c)) => match (c.len(), &c.data) {
                (1, super::Data::I(v)) => Ok(Pos::Static(v[0])),
                _ => Err(format!(
                    "the position (input {}, `{}`) must be one integer, not {} {:?}",
                    i + 1,
                    Self::name_of(node, i),
                    c.dtype,
                    c.dims
                )),
            },
            Some(v @ V::G(_)) => {
                args.push(self.g(&v, &Self::name_of(node, i))?);
                Ok(Pos::Run)
            }
        }
    }

    /// A sequence-typed graph input of `len` elements of type `ty`: `len` tensor inputs
    /// (`name.0`, `name.1`, ...; the generated `run` takes one `kiln::Seq`) and a
    /// `seq_construct` of them, as the DSL's `s: seq<tensor<...>, N>`.
    pub(super) fn seq_input(&mut self, name: &str, ty: TensorType, len: usize, at: Loc) {
        let mut elems = Vec::with_capacity(len);
        for k in 0..len {
            let i = self.graph.inputs.len();
            let v = self.graph.add_value(Producer::Input(i), at);
            self.graph.values[v.index()].name = Some(format!("{name}.{k}"));
            self.graph.inputs.push(Input {
                name: format!("{name}.{k}"),
                value: v,
                ty: ty.clone(),
                loc: at,
            });
            elems.push(v);
        }
        let s = self
            .graph
            .add_op(OpKind::SeqConstruct, elems, 1, at, vec![], None)[0];
        self.graph.values[s.index()].name = Some(name.to_string());
        self.env.insert(name.to_string(), V::G(s));
    }
}

/// A constant `split`: a scalar is a chunk size, a 1-D tensor the sizes.
fn const_split(c: &Const) -> R<SeqSplit> {
    let v = c.as_ints();
    match c.dims.len() {
        0 => match usize::try_from(v[0]) {
            Ok(n) if n > 0 => Ok(SeqSplit::Chunk(n)),
            _ => Err(format!("the split size {} must be at least 1", v[0])),
        },
        1 => v
            .iter()
            .map(|&s| usize::try_from(s))
            .collect::<Result<Vec<_>, _>>()
            .map(SeqSplit::Sizes)
            .map_err(|_| format!("the split sizes {v:?} must not be negative")),
        r => Err(format!("`split` is a scalar or a 1-D tensor, not rank {r}")),
    }
}
