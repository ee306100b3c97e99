//! The graph IR: values, ops and parameters in arenas indexed by typed ids, with types and
//! source locations in side tables. It knows nothing of the DSL: a front end builds a [`Graph`]
//! (`front::dsl` from the macro's tokens; a model-file or ONNX front end the same way), the
//! inference pass ([`crate::infer`]) types it, and every later pass reads those types.
//!
//! Invariants (checked by [`verify`]):
//!
//! * **Ids only point backwards**: an op's arguments are values defined before it, so the order
//!   of [`Graph::ops`] is a topological order and is the execution order.
//! * Every value has exactly one producer: a model input, a parameter, or one result slot of an
//!   op (ops may have several results).
//! * A *typed* graph (inference's output) has a [`Shape`] for every value in [`Graph::types`]
//!   and no unresolved attribute (`Padding::Same`) left; a front end's graph has no types yet.
//! * Locations are [`Loc`]s into the front end's own table, never spans: the same inference
//!   reports at a macro token, a file position or an ONNX node.

pub mod print;
pub mod types;
pub mod verify;

pub use types::{DType, Dim, Kind, Shape, SymId, TensorType, MAX_RANK};

use crate::diag::Loc;

macro_rules! id {
    ($name:ident) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}
id!(ValueId);
id!(OpId);
id!(ParamId);

/// An activation applied elementwise, alone or fused into the producer's epilogue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Act {
    None,
    Relu,
    Clip { min: f32, max: f32 },
    LeakyRelu { alpha: f32 },
    Sigmoid,
    Tanh,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    Max,
    Avg,
}

/// Window padding as declared; inference resolves `Same` and `Written` against the input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Padding {
    /// ONNX `SAME_UPPER`: the output is `ceil(in / stride)`, extra padding at the end.
    Same,
    /// Begins then ends, one of each per spatial dimension (ONNX `pads` order): `[begin, end]`
    /// in 1-D, `[top, left, bottom, right]` in 2-D, `[d0, h0, w0, d1, h1, w1]` in 3-D.
    Explicit(Vec<usize>),
    /// As written, before the front end knew the spatial rank `n` (a pooling window given as
    /// one number): one number for every side, `n` numbers for both ends of each dimension, or
    /// `2n` in [`Padding::Explicit`]'s order. Inference resolves it ([`Padding::expand`]).
    Written(Vec<usize>),
}

impl Padding {
    /// The padding of a typed graph, where inference has resolved every `Same` and `Written`.
    pub fn resolved(&self) -> &[usize] {
        match self {
            Padding::Explicit(p) => p,
            Padding::Same | Padding::Written(_) => {
                unreachable!("the IR verifier rejects unresolved padding in typed graphs")
            }
        }
    }

    /// Written numbers as explicit padding over `n` spatial dimensions, or `None` when their
    /// count is neither 1, `n` nor `2n`.
    pub fn expand(written: &[usize], n: usize) -> Option<Vec<usize>> {
        match written.len() {
            1 => Some(vec![written[0]; 2 * n]),
            l if l == n => Some(written.iter().chain(written).copied().collect()),
            l if l == 2 * n => Some(written.to_vec()),
            _ => None,
        }
    }
}

/// `[h, w]` geometry for the 2-D kernels: a 1-D size `[w]` runs as `[fill, w]` (height 1).
pub fn as_2d(v: &[usize], fill: usize) -> [usize; 2] {
    match v {
        [w] => [fill, *w],
        [h, w] => [*h, *w],
        _ => unreachable!("the IR verifier checks window ranks"),
    }
}

/// `[top, left, bottom, right]` for the 2-D kernels: 1-D `[begin, end]` pads only the width.
pub fn pad_2d(p: &[usize]) -> [usize; 4] {
    match p {
        [b, e] => [0, *b, 0, *e],
        [t, l, b, r] => [*t, *l, *b, *r],
        _ => unreachable!("the IR verifier checks padding lengths"),
    }
}

/// A window attribute of 1 to 3 spatial dimensions as a 3-D one, leading sizes `fill`.
pub fn as_3d(v: &[usize], fill: usize) -> [usize; 3] {
    match v {
        [w] => [fill, fill, *w],
        [h, w] => [fill, *h, *w],
        [d, h, w] => [*d, *h, *w],
        _ => unreachable!("the IR verifier checks window ranks"),
    }
}

/// 1- to 3-D padding (begins, then ends) as the 3-D kernels' six sides, no padding added.
pub fn pad_3d(p: &[usize]) -> [usize; 6] {
    match p {
        [b, e] => [0, 0, *b, 0, 0, *e],
        [t, l, b, r] => [0, *t, *l, 0, *b, *r],
        [a, b, c, d, e, f] => [*a, *b, *c, *d, *e, *f],
        _ => unreachable!("the IR verifier checks padding lengths"),
    }
}

/// Reductions over axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
}

/// Elementwise comparisons, giving `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Equal,
    Less,
    Greater,
    LessEq,
    GreaterEq,
}

impl CmpOp {
    pub const ALL: [(&'static str, CmpOp); 5] = [
        ("equal", CmpOp::Equal),
        ("less", CmpOp::Less),
        ("greater", CmpOp::Greater),
        ("less_equal", CmpOp::LessEq),
        ("greater_equal", CmpOp::GreaterEq),
    ];
    pub fn name(self) -> &'static str {
        CmpOp::ALL
            .iter()
            .find(|(_, c)| *c == self)
            .map_or("compare", |(n, _)| n)
    }
}

/// Elementwise math without a fused-epilogue form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MathOp {
    Sqrt,
    Exp,
    Log,
    Neg,
    Abs,
    Reciprocal,
    Erf,
    Softplus,
    Softsign,
}

impl MathOp {
    pub const ALL: [(&'static str, MathOp); 9] = [
        ("sqrt", MathOp::Sqrt),
        ("exp", MathOp::Exp),
        ("log", MathOp::Log),
        ("neg", MathOp::Neg),
        ("abs", MathOp::Abs),
        ("reciprocal", MathOp::Reciprocal),
        ("erf", MathOp::Erf),
        ("softplus", MathOp::Softplus),
        ("softsign", MathOp::Softsign),
    ];
    pub fn name(self) -> &'static str {
        MathOp::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("math", |(n, _)| n)
    }
}

/// What `reshape` turns its input into.
#[derive(Clone, Debug, PartialEq)]
pub enum ReshapeTo {
    /// `[N, everything else]`, a vector.
    Flatten,
    /// A declared type; `batch_given` is false when the user left the batch to the input's.
    Type { ty: TensorType, batch_given: bool },
    /// ONNX `Reshape` sizes: `0` copies the input's size at that position, one `-1` is
    /// inferred from the element count.
    Dims(Vec<i64>),
}

/// Operations. Parameters are values: a conv's weights are its second argument.
#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// Args: `x, weight, [bias], [gamma, beta, mean, var], [residual]` (the four statistics
    /// once a batch norm has been folded in: `bn` holds its epsilon; the residual once an
    /// `add` of the result has been fused in: `residual`).
    /// 1-, 2- or 3-D: `kernel`, `stride` and `dilation` have one size per spatial dimension
    /// of the input (`[N, C, L]`, `[N, C, H, W]`, `[N, C, D, H, W]`).
    Conv {
        /// Input channels as the weights declare them (the weight tensor holds `c_in / groups`).
        c_in: usize,
        kernel: Vec<usize>,
        stride: Vec<usize>,
        dilation: Vec<usize>,
        pad: Padding,
        groups: usize,
        has_bias: bool,
        bn: Option<f32>,
        /// A residual operand, shaped as the result, is added after the bias and before the
        /// activation (`fuse`: `act(add(conv(x), r))`); always 2-D, never Winograd or depthwise.
        residual: bool,
        act: Act,
    },
    /// Transposed convolution, 1-, 2- or 3-D. Args: `x, weight, [bias]`; the weight is
    /// `[c_in, c_out / groups, k...]` (ONNX's and PyTorch's layout). `pad` is what is cut from
    /// the full result (begins, then ends); `output_padding` is added at the end of each
    /// dimension.
    ConvTranspose {
        c_in: usize,
        kernel: Vec<usize>,
        stride: Vec<usize>,
        dilation: Vec<usize>,
        pad: Padding,
        output_padding: Vec<usize>,
        groups: usize,
        has_bias: bool,
    },
    /// Args: `x, weight, [bias], [gamma, beta, mean, var]`.
    Dense {
        has_bias: bool,
        bn: Option<f32>,
        act: Act,
    },
    /// Args: `x, gamma, beta, mean, var`.
    BatchNorm {
        eps: f32,
        act: Act,
    },
    Unary(Act),
    Binary(BinOp),
    /// 1-, 2- or 3-D. The front end may leave `kernel` and `stride` at one size each when it
    /// cannot know the rank (`max_pool(h, 2)`); inference gives them one per spatial dimension.
    Pool {
        kind: PoolKind,
        kernel: Vec<usize>,
        stride: Vec<usize>,
        /// Empty until inference when the front end gives none; then one per dimension.
        dilation: Vec<usize>,
        pad: Padding,
        count_include_pad: bool,
    },
    GlobalAvgPool,
    /// Along `axis` (negative counts from the end; inference makes it non-negative).
    Concat {
        axis: i64,
    },
    /// The same bytes under another shape (an alias, no kernel).
    Reshape(ReshapeTo),
    /// Softmax (or log-softmax) along `axis`; `None` means the channels of a feature map or
    /// vector and the last axis of a tensor. Inference resolves it.
    Softmax {
        axis: Option<i64>,
        log: bool,
    },
    /// ONNX `Transpose`.
    Transpose {
        perm: Vec<usize>,
    },
    /// Numpy `matmul`: batched, with broadcasting batch dimensions.
    MatMul,
    /// Over `axes` (inference sorts them and makes them non-negative).
    Reduce {
        kind: ReduceKind,
        axes: Vec<i64>,
        keepdims: bool,
    },
    Math(MathOp),
    /// A scalar constant (rank 0), for arithmetic with numbers: `add(x, 1e-5)`.
    Constant(f32),
    /// To another element type (numpy `astype`; to `bool`: nonzero).
    Cast(DType),
    /// ONNX `Gather` along `axis`: the indices are the second argument (i64 or i32, checked at
    /// run time), or `indices`, a constant checked at compile time.
    Gather {
        axis: i64,
        indices: Option<Vec<i64>>,
    },
    /// ONNX `Slice` with constant bounds. Inference resolves it: `starts` and `steps` then have
    /// one entry per axis (the first element taken and the stride), `ends` and `axes` are empty,
    /// and the result's shape gives the counts.
    Slice {
        starts: Vec<i64>,
        ends: Vec<i64>,
        axes: Vec<i64>,
        steps: Vec<i64>,
    },
    /// ONNX `Slice` with run-time bounds: args `x, starts, ends` (i64, one entry per axis of
    /// `axes`), step 1. The result's sizes along `axes` are known only at run time.
    SliceDyn {
        axes: Vec<i64>,
    },
    /// ONNX `NonZero`: the indices of the nonzero elements, `i64 [rank, n]` with `n` known only
    /// at run time.
    NonZero,
    /// ONNX `Split` with run-time sizes: args `x, sizes` (i64 `[parts]`), `parts` results whose
    /// size along `axis` is known only at run time (checked to add up: `Err` otherwise).
    SplitDyn {
        axis: i64,
        parts: usize,
    },
    /// ONNX `Range`: args `start, limit, delta` (scalars of one dtype); the count is known only
    /// at run time.
    Range,
    /// Elementwise comparison with broadcasting, giving `bool`.
    Compare(CmpOp),
    /// `a^b` (ONNX `Pow`), `f32`, with numpy broadcasting at any rank.
    Pow,
    /// Removes size-1 axes (all of them when `axes` is empty); inference makes it a reshape.
    Squeeze {
        axes: Vec<i64>,
    },
    /// Inserts size-1 axes at `axes` of the result; inference makes it a reshape.
    Unsqueeze {
        axes: Vec<i64>,
    },
    /// Into `sizes.len()` results along `axis`.
    Split {
        axis: i64,
        sizes: Vec<usize>,
    },
    Pad {
        pad: [usize; 4],
        value: f32,
    },
    /// Copies a value into the arena (an output that would otherwise be an input's bytes).
    Copy,
    /// ONNX `SequenceEmpty`: a sequence of no tensors of this dtype.
    SeqEmpty(DType),
    /// ONNX `SequenceConstruct`: args `a, b, ...` (at least one), the elements in order.
    SeqConstruct,
    /// ONNX `SequenceInsert`: args `s, x` (and the position's i64 scalar when `at` is
    /// [`Pos::Run`]); the default position is the end.
    SeqInsert {
        at: Pos,
    },
    /// ONNX `SequenceErase`: arg `s` (and the position when [`Pos::Run`]); the default
    /// position is the last element.
    SeqErase {
        at: Pos,
    },
    /// ONNX `SequenceAt`: arg `s` (and the position when [`Pos::Run`]). With a static position
    /// on a sequence whose order is known at compile time the result is a view of the element
    /// (no copy); otherwise the element is selected at run time and copied.
    SeqAt {
        at: Pos,
    },
    /// A sequence input without a length (`s: seq<tensor<f32[?,4]>>`): the `slot`th such input
    /// of `run` (named `name`), a run-time sequence of `dtype` elements of sizes `dims` (`None`:
    /// any size). No args.
    SeqInput {
        slot: usize,
        name: String,
        dtype: DType,
        dims: Vec<Option<usize>>,
    },
    /// ONNX `SequenceLength`: arg `s`; an `i64` scalar (the length is always known at compile
    /// time, but it is still a tensor the model computes).
    SeqLen,
    /// ONNX `SplitToSequence`: arg `x`. `split` as ONNX: absent (pieces of size 1 along
    /// `axis`, dropped when `keepdims` is false), a chunk size, or the sizes.
    SplitToSeq {
        axis: i64,
        split: SeqSplit,
        keepdims: bool,
    },
    /// ONNX `ConcatFromSequence`: arg `s`; along `axis`, or stacked along a new axis inserted
    /// at `axis` when `new_axis`.
    ConcatFromSeq {
        axis: i64,
        new_axis: bool,
    },
    /// A declared view (TVM's DeclBuffer): `x`'s bytes from element `offset` on, with the
    /// declared type's dims (and `x`'s dtype). No copy; checked to fit.
    View {
        ty: TensorType,
        offset: usize,
    },
}

/// A position in a sequence, as an op gives it. Negative positions count from the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pos {
    /// The op's default: the end for `insert`, the last element for `erase`.
    Default,
    /// Known at compile time, checked at compile time.
    Static(i64),
    /// Given at run time as the op's last argument (an i64 scalar), checked at run time.
    Run,
}

/// How `split_to_seq` cuts its input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeqSplit {
    /// Pieces of size 1 (ONNX `split` absent).
    Ones,
    /// Pieces of this size, the last one smaller when it does not divide (ONNX scalar `split`).
    Chunk(usize),
    /// These sizes, adding up to the axis (ONNX 1-D `split`).
    Sizes(Vec<usize>),
    /// Sizes given at run time as the op's second argument (an i64 tensor of `n` entries,
    /// checked to add up: `Err(SplitSizes)` otherwise): `n` elements whose sizes are known
    /// only at run time, so only `len` may read the sequence (for now).
    Run,
}

/// One element of a sequence: `shape`'s worth of bytes at element `offset` of `base`'s data
/// (a tensor value of the graph, or the buffer of a `split_to_seq`).
#[derive(Clone, Debug, PartialEq)]
pub struct Elem {
    pub base: ValueId,
    /// In elements of the dtype, from the start of `base`.
    pub offset: usize,
    pub shape: Shape,
}

impl Elem {
    /// Whether `at` can view this element where it is: its first byte is a whole number of the
    /// arena's 4-byte units from its base's (always true unless the dtype is 1 byte wide).
    pub fn viewable(&self) -> bool {
        (self.offset * self.shape.dtype.size()).is_multiple_of(4)
    }
}

/// What inference knows about a sequence value: which tensors it may hold, in which order.
///
/// Sequences are a compile-time structure: their length is always known. When every position
/// that built the sequence was known at compile time, `order` is `None` and `elems` are the
/// elements in order; when some position is given at run time, `elems` are the *candidates*
/// and the generated code keeps the order (`len` indices into `elems`) in a local array.
#[derive(Clone, Debug, PartialEq)]
pub struct SeqVal {
    pub dtype: DType,
    pub elems: Vec<Elem>,
    pub len: usize,
    /// The order is decided at run time (`elems` are candidates).
    pub run_order: bool,
    /// A *run-time sequence*: its length and its elements' sizes are decided at run time (a
    /// `split_to_seq` with run-time sizes, a sequence input without a length, and what
    /// `insert`/`erase` make of them). It lives in a grow-only buffer of the model, its
    /// elements copied in, so it holds no graph value: `elems` is empty and `len` is 0. The
    /// vector is the element type's sizes (`None`: `?`, known only per element at run time).
    pub run: Option<Vec<Option<usize>>>,
}

impl SeqVal {
    /// The element super type (onnx-mlir): each dimension equal in all candidates, or `None`
    /// (`?`); `None` for the rank too when candidates differ in rank or there are none.
    pub fn super_dims(&self) -> Option<Vec<Option<usize>>> {
        let first = &self.elems.first()?.shape;
        if self.elems.iter().any(|e| e.shape.rank() != first.rank()) {
            return None;
        }
        Some(
            (0..first.rank())
                .map(|i| {
                    let d = first.dims[i];
                    self.elems.iter().all(|e| e.shape.dims[i] == d).then_some(d)
                })
                .collect(),
        )
    }

    /// The element type as the DSL writes it: `seq<tensor<f32[?,3,4]>>`.
    pub fn type_text(&self) -> String {
        if let Some(dims) = &self.run {
            return format!("seq<{}>", run_elem_text(self.dtype, dims));
        }
        let dims = match self.super_dims() {
            Some(d) => d
                .iter()
                .map(|d| d.map_or("?".to_string(), |n| n.to_string()))
                .collect::<Vec<_>>()
                .join(","),
            None => "..".to_string(),
        };
        format!("seq<tensor<{}[{dims}]>, len = {}>", self.dtype, self.len)
    }
}

impl OpKind {
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Conv { kernel, .. } => match kernel.len() {
                1 => "conv1d",
                3 => "conv3d",
                _ => "conv2d",
            },
            OpKind::ConvTranspose { .. } => "conv_transpose",
            OpKind::Dense { .. } => "dense",
            OpKind::BatchNorm { .. } => "batch_norm",
            OpKind::Unary(_) => "activation",
            OpKind::Binary(BinOp::Add) => "add",
            OpKind::Binary(BinOp::Sub) => "sub",
            OpKind::Binary(BinOp::Mul) => "mul",
            OpKind::Binary(BinOp::Div) => "div",
            OpKind::Pool {
                kind: PoolKind::Max,
                ..
            } => "max_pool",
            OpKind::Pool {
                kind: PoolKind::Avg,
                ..
            } => "avg_pool",
            OpKind::GlobalAvgPool => "global_avg_pool",
            OpKind::Concat { .. } => "concat",
            OpKind::Reshape(ReshapeTo::Flatten) => "flatten",
            OpKind::Reshape(_) => "reshape",
            OpKind::Softmax { log: false, .. } => "softmax",
            OpKind::Softmax { log: true, .. } => "log_softmax",
            OpKind::Transpose { .. } => "transpose",
            OpKind::MatMul => "matmul",
            OpKind::Reduce {
                kind: ReduceKind::Sum,
                ..
            } => "reduce_sum",
            OpKind::Reduce {
                kind: ReduceKind::Mean,
                ..
            } => "reduce_mean",
            OpKind::Reduce {
                kind: ReduceKind::Max,
                ..
            } => "reduce_max",
            OpKind::Math(m) => m.name(),
            OpKind::Constant(_) => "constant",
            OpKind::Cast(_) => "cast",
            OpKind::SliceDyn { .. } => "slice",
            OpKind::NonZero => "nonzero",
            OpKind::Range => "range",
            OpKind::SplitDyn { .. } => "split",
            OpKind::Compare(c) => c.name(),
            OpKind::Pow => "pow",
            OpKind::Gather { .. } => "gather",
            OpKind::Slice { .. } => "slice",
            OpKind::Squeeze { .. } => "squeeze",
            OpKind::Unsqueeze { .. } => "unsqueeze",
            OpKind::Split { .. } => "split",
            OpKind::Pad { .. } => "pad",
            OpKind::Copy => "copy",
            OpKind::SeqEmpty(_) => "seq_empty",
            OpKind::SeqConstruct => "seq_construct",
            OpKind::SeqInsert { .. } => "insert",
            OpKind::SeqErase { .. } => "erase",
            OpKind::SeqAt { .. } => "at",
            OpKind::SeqLen => "len",
            OpKind::SeqInput { .. } => "seq_input",
            OpKind::SplitToSeq { .. } => "split_to_seq",
            OpKind::ConcatFromSeq { .. } => "concat_from_seq",
            OpKind::View { .. } => "view",
        }
    }

    /// Whether this is one of the sequence ops (inference types them by their own rules).
    pub fn is_seq(&self) -> bool {
        matches!(
            self,
            OpKind::SeqEmpty(_)
                | OpKind::SeqConstruct
                | OpKind::SeqInsert { .. }
                | OpKind::SeqErase { .. }
                | OpKind::SeqAt { .. }
                | OpKind::SeqLen
                | OpKind::SeqInput { .. }
                | OpKind::SplitToSeq { .. }
                | OpKind::ConcatFromSeq { .. }
        )
    }

    /// Whether the result is the first argument's bytes under another shape.
    pub fn is_alias(&self) -> bool {
        matches!(self, OpKind::Reshape(_))
    }

    /// How many arguments the op takes (`None`: any number, at least one), and results it has.
    pub fn arity(&self) -> (Option<usize>, usize) {
        let stats = |bn: &Option<f32>| if bn.is_some() { 4 } else { 0 };
        let n = match self {
            OpKind::Conv {
                has_bias,
                bn,
                residual,
                ..
            } => 2 + usize::from(*has_bias) + stats(bn) + usize::from(*residual),
            OpKind::Dense { has_bias, bn, .. } => 2 + usize::from(*has_bias) + stats(bn),
            OpKind::ConvTranspose { has_bias, .. } => 2 + usize::from(*has_bias),
            OpKind::BatchNorm { .. } => 5,
            OpKind::Binary(_) | OpKind::MatMul | OpKind::Compare(_) | OpKind::Pow => 2,
            OpKind::SliceDyn { .. } | OpKind::Range => 3,
            OpKind::NonZero => 1,
            OpKind::Concat { .. } | OpKind::SeqConstruct => return (None, 1),
            OpKind::SeqEmpty(_) | OpKind::SeqInput { .. } => 0,
            OpKind::SeqInsert { at } => 2 + usize::from(*at == Pos::Run),
            OpKind::SeqErase { at } | OpKind::SeqAt { at } => 1 + usize::from(*at == Pos::Run),
            OpKind::SplitToSeq { split, .. } => 1 + usize::from(*split == SeqSplit::Run),
            OpKind::SeqLen | OpKind::ConcatFromSeq { .. } | OpKind::View { .. } => 1,
            OpKind::Constant(_) => 0,
            OpKind::Split { sizes, .. } => return (Some(1), sizes.len()),
            OpKind::SplitDyn { parts, .. } => return (Some(2), *parts),
            OpKind::Gather { indices, .. } => 1 + usize::from(indices.is_none()),
            OpKind::Cast(_)
            | OpKind::Slice { .. }
            | OpKind::Squeeze { .. }
            | OpKind::Unsqueeze { .. } => 1,
            OpKind::Unary(_)
            | OpKind::Pool { .. }
            | OpKind::GlobalAvgPool
            | OpKind::Reshape(_)
            | OpKind::Softmax { .. }
            | OpKind::Pad { .. }
            | OpKind::Copy
            | OpKind::Transpose { .. }
            | OpKind::Reduce { .. }
            | OpKind::Math(_) => 1,
        };
        (Some(n), 1)
    }
}

/// An op: what it does, what it reads and writes, and where the user wrote it.
#[derive(Clone, Debug)]
pub struct Op {
    pub kind: OpKind,
    pub args: Vec<ValueId>,
    pub results: Vec<ValueId>,
    /// The op's name token.
    pub loc: Loc,
    /// Each argument as written (a parameter argument: its declaration).
    pub arg_locs: Vec<Loc>,
    /// The declaration the op's shape rule checks the input against, when there is one: the
    /// in-channels of `weights<...>`, the channels of `norm<...>`, a reshape's target type.
    pub decl: Option<Loc>,
    /// Declared in place by the user (`x.relu_()`, `add_(x, y)`): the result *is* the first
    /// argument's buffer, which the compiler proves safe (`alias.rs`) and the planner honours.
    pub in_place: bool,
}

impl Op {
    /// The result of a single-result op.
    pub fn result(&self) -> ValueId {
        self.results[0]
    }
    /// The arguments that are data rather than weights: a conv's, dense layer's or batch norm's
    /// first (and a conv's residual, its last); every argument of the other ops.
    pub fn data_args(&self) -> Vec<ValueId> {
        let params = self.param_range();
        let (before, after) = (&self.args[..params.start], &self.args[params.end..]);
        before.iter().chain(after).copied().collect()
    }

    /// The arguments that are parameters (weights, bias, folded statistics): the ones between
    /// a conv's, dense layer's or batch norm's input and, for a conv, its residual.
    pub fn param_args(&self) -> &[ValueId] {
        &self.args[self.param_range()]
    }

    fn param_range(&self) -> core::ops::Range<usize> {
        let n = self.args.len();
        match self.kind {
            OpKind::Conv { residual, .. } => n.min(1)..n - usize::from(residual && n > 1),
            OpKind::ConvTranspose { .. } | OpKind::Dense { .. } | OpKind::BatchNorm { .. } => {
                n.min(1)..n
            }
            _ => 0..0,
        }
    }
    /// Where the `i`th argument was written, or the op itself.
    pub fn arg_loc(&self, i: usize) -> Loc {
        self.arg_locs.get(i).copied().unwrap_or(self.loc)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Producer {
    /// The `i`th model input.
    Input(usize),
    Param(ParamId),
    /// Result `slot` of an op.
    Op {
        op: OpId,
        slot: u32,
    },
}

#[derive(Clone, Debug)]
pub struct Value {
    pub producer: Producer,
    /// The user's name for it (`let h = ...`), if any; used in printed IR and plans.
    pub name: Option<String>,
    pub loc: Loc,
}

/// A tensor read from the weights: a value like any other, stored outside the arena.
#[derive(Clone, Debug)]
pub struct Param {
    /// Its key in the weights file, e.g. `conv1.weight`.
    pub key: String,
    pub shape: Shape,
    pub value: ValueId,
    /// The parameter's name token (where "missing from the file" points) and its declared type
    /// (where a dtype or shape mismatch with the file points).
    pub name_loc: Loc,
    pub ty_loc: Loc,
}

#[derive(Clone, Debug)]
pub struct Input {
    pub name: String,
    pub value: ValueId,
    pub ty: TensorType,
    pub loc: Loc,
}

#[derive(Clone, Debug)]
pub struct Output {
    pub value: ValueId,
    /// The declared type in the signature, and where it is written. For a sequence
    /// (`seq<...>`), the element type.
    pub ty: TensorType,
    pub ty_loc: Loc,
    /// Declared as a sequence: the model returns a `kiln::Seq` of its elements.
    pub seq: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub inputs: Vec<Input>,
    pub values: Vec<Value>,
    pub ops: Vec<Op>,
    pub params: Vec<Param>,
    pub outputs: Vec<Output>,
    /// Names of the size symbols the declared types use.
    pub symbols: Vec<String>,
    /// The values to compile the symbols for: one binding per variant, each indexed by `SymId`.
    /// A graph without symbols has one empty binding.
    pub bindings: Vec<Vec<usize>>,
    /// Side table: the shape of every value, indexed by `ValueId`. Empty until inference.
    /// A sequence value's entry is a placeholder (a rank-0 tensor of its dtype); its real type
    /// is in `seqs`.
    pub types: Vec<Shape>,
    /// Side table: per value, what it holds if it is a sequence. Empty until inference.
    pub seqs: Vec<Option<SeqVal>>,
}

impl Graph {
    pub fn shape(&self, v: ValueId) -> &Shape {
        &self.types[v.index()]
    }
    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id.index()]
    }
    /// Whether inference has typed this graph.
    pub fn is_typed(&self) -> bool {
        !self.values.is_empty() && self.types.len() == self.values.len()
    }
    /// The op that produces `v`, if an op does.
    pub fn producer_op(&self, v: ValueId) -> Option<&Op> {
        match self.values[v.index()].producer {
            Producer::Op { op, .. } => Some(self.op(op)),
            _ => None,
        }
    }
    /// The number of ops that read `v`, plus one per output slot it fills.
    pub fn use_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.values.len()];
        for op in &self.ops {
            for a in &op.args {
                counts[a.index()] += 1;
            }
        }
        for o in &self.outputs {
            counts[o.value.index()] += 1;
        }
        counts
    }
    /// The value `v` is a view of, following aliases (reshape, a static `at`) back to the
    /// value that owns the bytes.
    pub fn alias_root(&self, mut v: ValueId) -> ValueId {
        while let Some(op) = self.producer_op(v) {
            if let Some(e) = self.seq_view(v) {
                v = e.base;
                continue;
            }
            if !op.kind.is_alias() && !matches!(op.kind, OpKind::View { .. }) {
                break;
            }
            v = op.args[0];
        }
        v
    }
    /// The sequence `v` is, if it is one (in a typed graph).
    pub fn seq(&self, v: ValueId) -> Option<&SeqVal> {
        self.seqs.get(v.index()).and_then(Option::as_ref)
    }
    /// The element `v` is a view of, when `v` is an `at` with a static position on a sequence
    /// whose order is known at compile time (no copy).
    pub fn seq_view(&self, v: ValueId) -> Option<&Elem> {
        let op = self.producer_op(v)?;
        let OpKind::SeqAt { at: Pos::Static(i) } = op.kind else {
            return None;
        };
        let s = self.seq(op.args[0])?;
        if s.run_order {
            return None;
        }
        let i = if i < 0 { i + s.len as i64 } else { i };
        s.elems
            .get(usize::try_from(i).ok()?)
            .filter(|e| e.viewable())
    }
    /// Whether `v` is a `split_to_seq` that copies its pieces into a buffer of its own (its
    /// input's sizes before the axis are not all 1, so the pieces are not runs of its bytes).
    pub fn split_copies(&self, v: ValueId) -> bool {
        let Some(op) = self.producer_op(v) else {
            return false;
        };
        matches!(op.kind, OpKind::SplitToSeq { .. })
            && self
                .seq(v)
                .is_some_and(|s| s.elems.first().is_some_and(|e| e.base == v))
    }
    /// The arguments of the op producing `v` (none for inputs and parameters).
    pub fn op_args(&self, v: ValueId) -> &[ValueId] {
        self.producer_op(v).map_or(&[], |op| &op.args)
    }
    /// True if `v` is (a view of) bytes outside the arena: a model input or a parameter.
    pub fn is_external(&self, v: ValueId) -> bool {
        matches!(
            self.values[self.alias_root(v).index()].producer,
            Producer::Input(_) | Producer::Param(_)
        )
    }
    /// Appends a value; the caller appends its producer. In a typed graph, also its shape.
    pub fn add_value(&mut self, producer: Producer, loc: Loc) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(Value {
            producer,
            name: None,
            loc,
        });
        id
    }
    /// Appends an op with `results` fresh result values.
    pub fn add_op(
        &mut self,
        kind: OpKind,
        args: Vec<ValueId>,
        results: usize,
        loc: Loc,
        arg_locs: Vec<Loc>,
        decl: Option<Loc>,
    ) -> Vec<ValueId> {
        let op = OpId(self.ops.len() as u32);
        let results: Vec<ValueId> = (0..results)
            .map(|slot| {
                self.add_value(
                    Producer::Op {
                        op,
                        slot: slot as u32,
                    },
                    loc,
                )
            })
            .collect();
        self.ops.push(Op {
            kind,
            args,
            results: results.clone(),
            loc,
            arg_locs,
            decl,
            in_place: false,
        });
        results
    }
    /// Appends a parameter and the value that stands for it.
    pub fn add_param(&mut self, key: String, shape: Shape, name_loc: Loc, ty_loc: Loc) -> ValueId {
        let id = ParamId(self.params.len() as u32);
        let value = self.add_value(Producer::Param(id), name_loc);
        self.params.push(Param {
            key,
            shape,
            value,
            name_loc,
            ty_loc,
        });
        value
    }
}

/// The element type of a run-time sequence as the DSL writes it: `tensor<f32[?,4]>`.
pub fn run_elem_text(dtype: DType, dims: &[Option<usize>]) -> String {
    let dims: Vec<String> = dims
        .iter()
        .map(|d| d.map_or("?".to_string(), |n| n.to_string()))
        .collect();
    format!("tensor<{dtype}[{}]>", dims.join(","))
}
