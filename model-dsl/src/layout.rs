//! From the typed graph to the planner's problem, and the layout of the prepared parameter
//! buffer.
//!
//! The planner itself (`plan.rs`) knows nothing about ops; this module says which values need
//! arena bytes, which are aliases (reshape/flatten), which may be computed in place over an
//! input that dies (elementwise ops), and how much scratch each kernel needs. Parameters are
//! values of the graph but never arena bytes: they are left out of the problem, and
//! [`Planned::slot`] maps the graph's values to the problem's.

use crate::blocked::Blocked;
use crate::contract::{
    conv2d_scratch, conv3d_scratch, conv_algo as algo_2d, conv_transpose_scratch, ConvAlgo,
};
use crate::ir::{as_2d, pad_2d, Graph, Op, OpKind, ParamId, Producer, ValueId};
use crate::plan::{Problem, ScratchReq, ValueKind, ValueReq};

/// The algorithm of a 1-D or 2-D convolution op ([`crate::contract::conv_algo`] on its
/// geometry, 1-D as 2-D of height 1); `None` for any other op and for 3-D convolutions (always
/// im2col + GEMM).
pub fn conv_algo(g: &Graph, op: &Op) -> Option<ConvAlgo> {
    let p = conv2d_geom(g, op)?;
    Some(algo_2d(
        [p.kh, p.kw],
        p.stride,
        p.dilation,
        p.pad,
        p.groups,
        p.c_in,
        p.c_out,
        [p.out_h, p.out_w],
    ))
}

/// Whether conv op `op` is a Winograd layer the CPU decides the algorithm of
/// ([`crate::contract::few_tiles`]): it gets both weight preparations and the scratch of both.
pub fn few_tiles(g: &Graph, op: &Op) -> bool {
    match (conv_algo(g, op), conv2d_geom(g, op)) {
        (Some(algo), Some(p)) => {
            crate::contract::few_tiles(algo, p.c_in, p.c_out, [p.out_h, p.out_w])
        }
        _ => false,
    }
}

/// The kernels' geometry of a 1-D or 2-D convolution op (1-D as 2-D of height 1); `None` for
/// any other op and for 3-D convolutions.
pub fn conv2d_geom(g: &Graph, op: &Op) -> Option<kiln_kernels::Conv2d> {
    let OpKind::Conv {
        kernel,
        stride,
        dilation,
        pad,
        groups,
        ..
    } = &op.kind
    else {
        return None;
    };
    if kernel.len() == 3 {
        return None;
    }
    let (x, y) = (g.shape(op.args[0]), g.shape(op.result()));
    let ([h, w], [out_h, out_w]) = (as_2d(x.spatial_dims(), 1), as_2d(y.spatial_dims(), 1));
    let [kh, kw] = as_2d(kernel, 1);
    Some(kiln_kernels::Conv2d {
        batch: x.batch(),
        c_in: x.channels(),
        h,
        w,
        c_out: y.channels(),
        kh,
        kw,
        stride: as_2d(stride, 1),
        dilation: as_2d(dilation, 1),
        pad: pad_2d(pad.resolved()),
        groups: *groups,
        out_h,
        out_w,
    })
}

/// f32 elements of scratch an op needs (only a convolution has any), from
/// [`crate::contract::conv2d_scratch`] for the algorithm [`conv_algo`] chose (1-D runs as 2-D
/// of height 1), [`crate::contract::conv3d_scratch`] or [`crate::contract::conv_transpose_scratch`].
pub fn scratch_len(g: &Graph, op: &Op) -> usize {
    if let OpKind::ConvTranspose { kernel, groups, .. } = &op.kind {
        let x = g.shape(op.args[0]);
        let y = g.shape(op.result());
        let vol = x.spatial_dims().iter().product();
        let taps = kernel.iter().product();
        return conv_transpose_scratch(vol, x.channels() / groups, y.channels() / groups, taps)
            .unwrap_or(usize::MAX);
    }
    let OpKind::Conv {
        kernel,
        stride,
        dilation,
        pad,
        groups,
        ..
    } = &op.kind
    else {
        return 0;
    };
    let x = g.shape(op.args[0]);
    let y = g.shape(op.result());
    let out = y.spatial_dims();
    // Inference rejects a convolution whose scratch size overflows, so this never saturates.
    match conv_algo(g, op) {
        None => {
            let three = |v: &[usize]| -> [usize; 3] { v.try_into().expect("3-D") };
            let pad = pad.resolved().try_into().expect("3-D padding has 6 sides");
            let c_in = x.channels() / groups;
            conv3d_scratch(three(kernel), three(stride), pad, c_in, three(out))
        }
        Some(algo) => conv2d_scratch(
            algo,
            as_2d(kernel, 1),
            as_2d(stride, 1),
            as_2d(dilation, 1),
            pad_2d(pad.resolved()),
            *groups,
            x.channels(),
            y.channels(),
            as_2d(out, 1),
        ),
    }
    .unwrap_or(usize::MAX)
}

/// f32 elements of scratch op `i` needs in the plan `blocked` says (`None`: the NCHW plan):
/// a blocked convolution's conversion buffers ([`Blocked::scratch_parts`]), else
/// [`scratch_len`].
pub fn op_scratch_len(g: &Graph, blocked: Option<&Blocked>, i: usize) -> usize {
    match blocked.filter(|b| b.convs[i]) {
        Some(b) => b.scratch_len(g, i),
        None => scratch_len(g, &g.ops[i]),
    }
}

/// The planning problem of a graph, and how its values map onto the problem's.
#[derive(Debug)]
pub struct Planned {
    pub problem: Problem,
    /// Per graph value: its index in `problem.values` (`None` for parameters).
    pub slot: Vec<Option<usize>>,
    /// Per op: its index in `problem.scratch`, if it needs scratch.
    pub scratch: Vec<Option<usize>>,
    /// The concatenations that copy nothing (codegen emits no code for them).
    pub free: FreeConcats,
}

/// The problem of `g` planned all NCHW (`blocked: None`) or with `blocked`'s values stored
/// NCHW16c and its convolutions' conversion scratch.
pub fn problem(g: &Graph, blocked: Option<&Blocked>) -> Planned {
    problem_with(g, free_concats(g), blocked)
}

/// The problem with every concatenation copying its parts (see [`free_concats`]): a free
/// concatenation keeps its parts' bytes from the first part's step to the result's last use,
/// which can cost more than the copy saves, so the driver plans both and keeps the smaller.
pub fn problem_copying(g: &Graph, blocked: Option<&Blocked>) -> Planned {
    let none = FreeConcats {
        concats: Vec::new(),
        part: vec![None; g.values.len()],
    };
    problem_with(g, none, blocked)
}

fn problem_with(g: &Graph, free: FreeConcats, blocked: Option<&Blocked>) -> Planned {
    let mut slot = vec![None; g.values.len()];
    let mut values: Vec<ValueReq> = Vec::new();
    // Per free concatenation (indexed like `free.concats`): the problem index of its buffer.
    let mut buffer: Vec<Option<usize>> = vec![None; free.concats.len()];
    for (i, v) in g.values.iter().enumerate() {
        let id = ValueId(i as u32);
        // The first part of a free concatenation: its buffer comes first, written (by the
        // parts' producers) from this part's step on.
        if let (Some((k, _)), Producer::Op { op, .. }) = (free.part[i], v.producer) {
            if buffer[k].is_none() {
                let result = free.concats[k];
                buffer[k] = Some(values.len());
                values.push(ValueReq {
                    name: format!("%{} buffer", result.0),
                    bytes: g.shape(result).bytes(),
                    def: op.index(),
                    uses: Vec::new(),
                    is_output: false,
                    kind: ValueKind::Arena { reuse: Vec::new() },
                });
            }
        }
        let name = match &v.name {
            Some(n) => format!("%{i} {n}"),
            None => format!("%{i}"),
        };
        let (def, kind, name) = match v.producer {
            Producer::Param(_) => continue,
            // Data-dependent values live in the model's grow-only buffers, not in the arena.
            Producer::Op { .. } if g.shape(id).is_dynamic() => continue,
            // So do run-time sequences (copies of their elements: they hold no arena value).
            Producer::Op { .. } if g.seq(id).is_some_and(|s| s.run.is_some()) => continue,
            Producer::Input(_) => (0, ValueKind::External, format!("{name} (input)")),
            Producer::Op { op, .. } => {
                let o = g.op(op);
                let kind = if let Some(s) = g.seq(id).filter(|_| !g.split_copies(id)) {
                    // A sequence holds the arena tensors its elements are (escape analysis).
                    let mut members: Vec<usize> = Vec::new();
                    for e in &s.elems {
                        match slot[e.base.index()] {
                            Some(m) if !g.is_external(e.base) && !members.contains(&m) => {
                                members.push(m)
                            }
                            _ => {}
                        }
                    }
                    ValueKind::Seq { members }
                } else if let Some((k, offset)) = free.part[i] {
                    // Written straight into the concatenation's buffer.
                    ValueKind::Member {
                        of: buffer[k].expect("the buffer precedes its parts"),
                        offset,
                    }
                } else if let Some(k) = free.concats.iter().position(|&c| c == id) {
                    // The parts are already in place: the result is the buffer, no copy.
                    ValueKind::Alias {
                        of: buffer[k].expect("the buffer precedes the result"),
                    }
                } else if g.is_external(id) {
                    ValueKind::External
                } else if let OpKind::View { offset, .. } = o.kind {
                    ValueKind::Member {
                        of: slot[o.args[0].index()].expect("views view arena values"),
                        // `offset` counts the buffer's elements (the view's dtype may differ).
                        offset: offset * g.shape(o.args[0]).dtype.size(),
                    }
                } else if let Some(e) = g.seq_view(id) {
                    ValueKind::Member {
                        of: slot[e.base.index()].expect("sequence elements are arena values"),
                        offset: e.offset * e.shape.dtype.size(),
                    }
                } else if o.kind.is_alias() {
                    ValueKind::Alias {
                        of: slot[o.args[0].index()].expect("aliases view arena values"),
                    }
                } else {
                    ValueKind::Arena {
                        reuse: reuse_candidates(g, o, &slot, &values),
                    }
                };
                let why = copy_reason(g, id).map_or(String::new(), |r| format!(" ({r})"));
                (op.index(), kind, format!("{name} = {}{why}", o.kind.name()))
            }
        };
        slot[i] = Some(values.len());
        let bytes = match &kind {
            ValueKind::Seq { .. } => 0,
            // A `split_to_seq` that copies keeps its pieces in a buffer of its input's size.
            _ if g.split_copies(id) => g.shape(g.op_args(id)[0]).bytes(),
            _ => match blocked.and_then(|b| b.stored_len(g, id)) {
                Some(len) => len * 4,
                None => g.shape(id).bytes(),
            },
        };
        values.push(ValueReq {
            name,
            bytes,
            def,
            uses: Vec::new(),
            is_output: false,
            kind,
        });
    }
    for (i, op) in g.ops.iter().enumerate() {
        for a in &op.args {
            let Some(s) = slot[a.index()] else { continue };
            let uses = &mut values[s].uses;
            if uses.last() != Some(&i) {
                uses.push(i);
            }
        }
    }
    for o in &g.outputs {
        if let Some(s) = slot[o.value.index()] {
            values[s].is_output = true;
        }
    }
    let mut scratch = Vec::new();
    let mut scratch_of = vec![None; g.ops.len()];
    for (i, of) in scratch_of.iter_mut().enumerate() {
        let len = op_scratch_len(g, blocked, i);
        if len > 0 {
            *of = Some(scratch.len());
            scratch.push(ScratchReq {
                step: i,
                bytes: len.saturating_mul(4),
            });
        }
    }
    Planned {
        problem: Problem {
            steps: g.ops.len(),
            values,
            scratch,
        },
        slot,
        scratch: scratch_of,
        free,
    }
}

/// Why an op that only moves bytes copies them, for the printed plan: the cases where a copy
/// is truly needed.
fn copy_reason(g: &Graph, v: ValueId) -> Option<&'static str> {
    let op = g.producer_op(v)?;
    match op.kind {
        OpKind::Copy => Some("an output is borrowed from the arena, and this is an input's bytes"),
        OpKind::SeqAt { .. } if g.seq_view(v).is_none() => {
            Some("copied: the element is chosen at run time")
        }
        OpKind::SplitToSeq { .. } if g.split_copies(v) => {
            Some("pieces copied: they are not runs of the input's bytes")
        }
        _ => None,
    }
}

/// Concatenations that cost nothing: the producers of the parts write straight into the
/// result's buffer (a "member at offset k of a larger buffer"), and the concat op itself emits
/// no code.
#[derive(Debug, Default)]
pub struct FreeConcats {
    /// The result of each free concatenation.
    pub concats: Vec<ValueId>,
    /// Per graph value: the free concatenation it is a part of and its byte offset there.
    pub part: Vec<Option<(usize, usize)>>,
}

/// Which `concat`s and `concat_from_seq`s can be free. Legal when the result is contiguous per
/// part (every size before the axis is 1) and every part is a whole tensor that an op writes
/// into storage of its own: not an input, parameter or view (reshape, sequence element), not
/// an output, not dynamic, in no other free concatenation, not itself the result of a free
/// concatenation (its parts are members of *its* buffer, which would then have to be a member
/// of this one: not supported, so the outer concatenation copies), listed once, 4-byte aligned
/// in the result, and not produced from another part (whose bytes its op would then both read
/// and write, which codegen would take for an in-place op).
pub fn free_concats(g: &Graph) -> FreeConcats {
    let mut free = FreeConcats {
        concats: Vec::new(),
        part: vec![None; g.values.len()],
    };
    let outputs: Vec<ValueId> = g.outputs.iter().map(|o| o.value).collect();
    for op in &g.ops {
        let (axis, parts): (usize, Vec<ValueId>) = match &op.kind {
            OpKind::Concat { axis } => (*axis as usize, op.args.clone()),
            OpKind::ConcatFromSeq { axis, .. } => {
                let Some(s) = g
                    .seq(op.args[0])
                    .filter(|s| !s.run_order && s.run.is_none())
                else {
                    continue;
                };
                let whole = s
                    .elems
                    .iter()
                    .all(|e| e.offset == 0 && e.shape.elements() == g.shape(e.base).elements());
                if !whole || g.seq(s.elems[0].base).is_some() {
                    continue;
                }
                (*axis as usize, s.elems.iter().map(|e| e.base).collect())
            }
            _ => continue,
        };
        let y = g.shape(op.result());
        if y.is_dynamic() || y.dims[..axis].iter().product::<usize>() != 1 {
            continue;
        }
        let mut offsets = Vec::with_capacity(parts.len());
        let mut at = 0usize;
        let ok = parts.iter().enumerate().all(|(j, &p)| {
            let Some(producer) = g.producer_op(p) else {
                return false;
            };
            let fits = !parts[..j].contains(&p)
                && free.part[p.index()].is_none()
                && !free.concats.contains(&p)
                && !outputs.contains(&p)
                && !g.is_external(p)
                && !producer.kind.is_alias()
                && !producer.kind.is_seq()
                && !g.ops.iter().any(|o| o.in_place && o.args[0] == p)
                && !g.shape(p).is_dynamic()
                && at.is_multiple_of(4)
                && producer
                    .args
                    .iter()
                    .all(|a| !parts.contains(&g.alias_root(*a)));
            offsets.push(at);
            at += g.shape(p).bytes();
            fits
        });
        if !ok {
            continue;
        }
        let k = free.concats.len();
        free.concats.push(op.result());
        for (&p, off) in parts.iter().zip(offsets) {
            free.part[p.index()] = Some((k, off));
        }
    }
    free
}

/// The arguments an op reads elementwise (the ones its result may overwrite): the data
/// arguments, not the parameters.
/// (Broadcasting arithmetic above rank 4 runs the out-of-place `binary_nd` only.)
fn elementwise_args(g: &Graph, op: &Op) -> Vec<ValueId> {
    match op.kind {
        OpKind::Binary(_) if !table_binary(g.shape(op.result())) => Vec::new(),
        OpKind::Unary(_)
        | OpKind::Binary(_)
        | OpKind::Softmax { .. }
        | OpKind::Math(_)
        | OpKind::BatchNorm { .. } => op.data_args(),
        _ => Vec::new(),
    }
}

/// Whether arithmetic with this result shape runs on the kernel table's `binary` (rank at most
/// 4, f32, and an in-place form); otherwise on the rank-N `binary_nd`, out of place only.
pub fn table_binary(out: &crate::ir::Shape) -> bool {
    out.rank() <= 4 && out.dtype == crate::ir::DType::F32
}

/// Inputs whose bytes the op's result may take over when they die here: same shape as the
/// result and read elementwise.
fn reuse_candidates(g: &Graph, op: &Op, slot: &[Option<usize>], values: &[ValueReq]) -> Vec<usize> {
    let out = g.shape(op.result());
    let mut seen = Vec::new();
    for a in &elementwise_args(g, op) {
        let Some(s) = slot[a.index()] else { continue };
        // A member view sits inside a larger buffer; the in-place result would be placed at
        // the buffer's start, not at the member's bytes.
        if matches!(values[s].kind, ValueKind::Member { .. }) {
            continue;
        }
        // `add(x, x)` can't be in place: the kernel would need the same bytes as `&mut` and `&`.
        if g.shape(*a) == out
            && !seen.contains(&s)
            && op.args.iter().filter(|b| *b == a).count() == 1
        {
            seen.push(s);
        }
    }
    seen
}

/// Where each parameter lives in the prepared parameter buffer (f32 offsets, 64-byte aligned),
/// plus the slots the loader computes: zero biases for folded layers without one, and the
/// scale/shift of standalone batch norms.
#[derive(Debug, PartialEq, Eq)]
pub struct ParamLayout {
    pub params: Vec<Slot>,
    /// Per op: a synthesized bias (folded conv/dense without bias).
    pub bias: Vec<Option<Slot>>,
    /// Per op: (scale, shift) of a standalone batch norm.
    pub scale_shift: Vec<Option<(Slot, Slot)>>,
    /// Per op: the filters of a Winograd convolution in the Winograd domain (`[36, c_out,
    /// c_in]`, computed from the weights after any batch-norm folding).
    pub winograd: Vec<Option<Slot>>,
    /// Per op: the weights of a blocked convolution packed for `conv2d_nchwc`
    /// (`kiln_kernels::nchwc::pack_weights`), or for a blocked Winograd one
    /// ([`crate::blocked::winograd`]) transformed for `conv2d_nchwc_winograd`
    /// (`nchwc::winograd::transform_filter`); after any batch-norm folding.
    pub nchwc: Vec<Option<Slot>>,
    pub len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub start: usize,
    pub len: usize,
}

impl Slot {
    pub fn end(self) -> usize {
        self.start + self.len
    }
}

/// The parameter buffer of `g`, with the packed weights of `blocked`'s convolutions.
pub fn param_layout(g: &Graph, blocked: Option<&Blocked>) -> ParamLayout {
    let mut len = 0;
    let mut alloc = |n: usize| {
        let slot = Slot { start: len, len: n };
        len += n.div_ceil(16) * 16;
        slot
    };
    let params = g.params.iter().map(|p| alloc(p.shape.elements())).collect();
    let mut bias = Vec::new();
    let mut scale_shift = Vec::new();
    let mut winograd = Vec::new();
    let mut nchwc = Vec::new();
    for (i, op) in g.ops.iter().enumerate() {
        let c = g.shape(op.result()).channels();
        bias.push(match &op.kind {
            OpKind::Conv {
                has_bias: false,
                bn: Some(_),
                ..
            }
            | OpKind::Dense {
                has_bias: false,
                bn: Some(_),
                ..
            } => Some(alloc(c)),
            _ => None,
        });
        scale_shift.push(match &op.kind {
            OpKind::BatchNorm { .. } => Some((alloc(c), alloc(c))),
            _ => None,
        });
        winograd.push(
            (conv_algo(g, op) == Some(ConvAlgo::Winograd))
                .then(|| alloc(36 * c * g.shape(op.args[0]).channels())),
        );
        nchwc.push(blocked.filter(|b| b.convs[i]).map(|b| {
            let [kh, kw] = match &op.kind {
                OpKind::Conv { kernel, .. } => as_2d(kernel, 1),
                _ => unreachable!("only convolutions are blocked"),
            };
            let c_in = g.shape(op.args[0]).channels();
            alloc(if b.winograd(g, i) {
                kiln_kernels::nchwc::winograd::filter_len(c, c_in)
            } else {
                kiln_kernels::nchwc::packed_weight_len(c, c_in, kh, kw)
            })
        }));
    }
    ParamLayout {
        params,
        bias,
        scale_shift,
        winograd,
        nchwc,
        len,
    }
}

impl ParamLayout {
    pub fn param(&self, p: ParamId) -> Slot {
        self.params[p.index()]
    }
    /// The slot of a value that is a parameter.
    pub fn of_value(&self, g: &Graph, v: ValueId) -> Option<Slot> {
        match g.values[v.index()].producer {
            Producer::Param(p) => Some(self.param(p)),
            _ => None,
        }
    }
}
