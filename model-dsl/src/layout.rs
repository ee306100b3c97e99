//! From the graph to the planner's problem, and the layout of the prepared parameter buffer.
//!
//! The planner itself (`plan.rs`) knows nothing about ops; this module says which values need
//! arena bytes, which are aliases (reshape/flatten), which may be computed in place over an
//! input that dies (elementwise ops), and how much scratch each kernel needs.

use crate::ir::{Graph, OpKind, ParamId, Producer, ValueId};
use crate::plan::{Problem, ScratchReq, ValueKind, ValueReq};

/// f32 elements of scratch `conv2d` needs. This duplicates
/// `kiln_kernels::Conv2d::scratch_len`; the generated code asserts at compile time that the
/// planned scratch is at least what the kernel asks for, so the two cannot drift apart unseen.
pub fn conv_scratch_len(g: &Graph, op: &crate::ir::Op) -> usize {
    let OpKind::Conv2d {
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
    let y = g.shape(op.result);
    // Lowering rejects a convolution whose scratch size overflows, so this never saturates.
    conv_scratch(
        *kernel,
        *stride,
        *dilation,
        *pad,
        x.channels() / groups,
        y.channels() / groups,
        y.spatial(),
    )
    .unwrap_or(usize::MAX)
}

/// The formula of [`conv_scratch_len`] on the convolution's geometry (`c_in` and `c_out` per
/// group), or `None` if the count overflows `usize`. It multiplies in the kernel's order, so when
/// this fits, the kernel's own `const` evaluation of the formula fits too.
///
/// * a 1x1, stride-1, unpadded convolution: none (a GEMM on the activations);
/// * a depthwise 3x3 or 5x5 with the same stride `s` of 1 or 2 both ways, no dilation and
///   top/left padding below the window: the SIMD kernels' zero-padded band buffer; with
///   stride 2 or `ow <= 8` the channels-in-lanes kernel's, `((bands - 1) * s + k) * row + 16`
///   with `row = ((ow - 1) * s + k) * 16`, `fit = 32768 / row` and
///   `bands = min(oh, if fit < k { 1 } else { (fit - k) / s + 1 })`, else the planar
///   kernel's, `((min(oh, 16) - 1) * s + k) * s * (max(ow, 16) + k + 16)`;
/// * any other depthwise convolution: none (direct loops);
/// * otherwise the im2col matrix of one group of one image, `c_in * kh * kw * oh * ow`.
pub fn conv_scratch(
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: [usize; 4],
    c_in: usize,
    c_out: usize,
    [oh, ow]: [usize; 2],
) -> Option<usize> {
    let pointwise = kernel == [1, 1] && stride == [1, 1] && pad == [0; 4];
    let depthwise = c_in == 1 && c_out == 1;
    let [k, s] = [kernel[0], stride[0]];
    let banded = depthwise
        && kernel[1] == k
        && (k == 3 || k == 5)
        && stride[1] == s
        && (s == 1 || s == 2)
        && dilation == [1, 1]
        && pad[0] < k
        && pad[1] < k;
    if pointwise {
        Some(0)
    } else if banded && oh > 0 && ow > 0 && (s == 2 || ow <= 8) {
        let row = (ow - 1).checked_mul(s)?.checked_add(k)?.checked_mul(16)?;
        let fit = 32768 / row;
        let bands = oh.min(if fit < k { 1 } else { (fit - k) / s + 1 });
        row.checked_mul((bands - 1) * s + k)?.checked_add(16)
    } else if banded {
        let rows = if oh == 0 { 0 } else { (oh.min(16) - 1) * s + k };
        ow.max(16).checked_add(k + 16)?.checked_mul(rows * s)
    } else if depthwise {
        Some(0)
    } else {
        c_in.checked_mul(kernel[0])?
            .checked_mul(kernel[1])?
            .checked_mul(oh)?
            .checked_mul(ow)
    }
}

/// True if `v` is (a view of) a model input rather than arena bytes.
pub fn is_external(g: &Graph, mut v: ValueId) -> bool {
    loop {
        match g.values[v.index()].producer {
            Producer::Input(_) => return true,
            Producer::Op(op) => {
                let op = g.op(op);
                if op.kind != OpKind::Reshape {
                    return false;
                }
                v = op.args[0];
            }
        }
    }
}

pub fn problem(g: &Graph) -> Problem {
    let mut values: Vec<ValueReq> = g
        .values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let name = match &v.name {
                Some(n) => format!("%{i} {n}"),
                None => format!("%{i}"),
            };
            let (def, kind) = match v.producer {
                Producer::Input(_) => (0, ValueKind::External),
                Producer::Op(op) => {
                    let o = g.op(op);
                    let kind = if is_external(g, ValueId(i as u32)) {
                        ValueKind::External
                    } else if o.kind == OpKind::Reshape {
                        ValueKind::Alias {
                            of: o.args[0].index(),
                        }
                    } else {
                        ValueKind::Arena {
                            reuse: reuse_candidates(g, o),
                        }
                    };
                    (op.index(), kind)
                }
            };
            let name = match v.producer {
                Producer::Op(op) => format!("{name} = {}", g.op(op).kind.name()),
                Producer::Input(_) => format!("{name} (input)"),
            };
            ValueReq {
                name,
                bytes: g.shapes[i].elements() * 4,
                def,
                uses: Vec::new(),
                is_output: false,
                kind,
            }
        })
        .collect();
    for (i, op) in g.ops.iter().enumerate() {
        for a in &op.args {
            let uses = &mut values[a.index()].uses;
            if uses.last() != Some(&i) {
                uses.push(i);
            }
        }
    }
    for o in &g.outputs {
        values[o.value.index()].is_output = true;
    }
    let scratch = g
        .ops
        .iter()
        .enumerate()
        .filter_map(|(i, op)| {
            let len = conv_scratch_len(g, op);
            (len > 0).then_some(ScratchReq {
                step: i,
                bytes: len.saturating_mul(4),
            })
        })
        .collect();
    Problem {
        steps: g.ops.len(),
        values,
        scratch,
    }
}

/// Inputs whose bytes the op's result may take over when they die here: same shape as the
/// result and read elementwise.
fn reuse_candidates(g: &Graph, op: &crate::ir::Op) -> Vec<usize> {
    let elementwise = matches!(
        op.kind,
        OpKind::Unary(_) | OpKind::Binary(_) | OpKind::BatchNorm { .. } | OpKind::Softmax
    );
    if !elementwise {
        return Vec::new();
    }
    let out = g.shape(op.result);
    let mut seen = Vec::new();
    for a in &op.args {
        // `add(x, x)` can't be in place: the kernel would need the same bytes as `&mut` and `&`.
        if g.shape(*a) == out
            && !seen.contains(&a.index())
            && op.args.iter().filter(|b| *b == a).count() == 1
        {
            seen.push(a.index());
        }
    }
    seen
}

/// Where each parameter lives in the prepared parameter buffer (f32 offsets, 64-byte aligned),
/// plus the slots the loader computes: zero biases for folded layers without one, and the
/// scale/shift of standalone batch norms.
#[derive(Debug)]
pub struct ParamLayout {
    pub params: Vec<Slot>,
    /// Per op: a synthesized bias (folded conv/dense without bias).
    pub bias: Vec<Option<Slot>>,
    /// Per op: (scale, shift) of a standalone batch norm.
    pub scale_shift: Vec<Option<(Slot, Slot)>>,
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

pub fn param_layout(g: &Graph) -> ParamLayout {
    let mut len = 0;
    let mut alloc = |n: usize| {
        let slot = Slot { start: len, len: n };
        len += n.div_ceil(16) * 16;
        slot
    };
    let params = g
        .params
        .iter()
        .map(|p| alloc(p.shape.iter().product()))
        .collect();
    let mut bias = Vec::new();
    let mut scale_shift = Vec::new();
    for op in &g.ops {
        let c = g.shape(op.result).channels();
        bias.push(match &op.kind {
            OpKind::Conv2d {
                bias: None,
                bn: Some(_),
                ..
            }
            | OpKind::Dense {
                bias: None,
                bn: Some(_),
                ..
            } => Some(alloc(c)),
            _ => None,
        });
        scale_shift.push(match &op.kind {
            OpKind::BatchNorm { .. } => Some((alloc(c), alloc(c))),
            _ => None,
        });
    }
    ParamLayout {
        params,
        bias,
        scale_shift,
        len,
    }
}

impl ParamLayout {
    pub fn param(&self, p: ParamId) -> Slot {
        self.params[p.index()]
    }
}
