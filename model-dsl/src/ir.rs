//! The graph IR: values, ops and parameters in arenas indexed by typed ids.
//!
//! Ids only point backwards (an op's arguments are values defined before it), so the order of
//! `Graph::ops` is a topological order and is the execution order. Shapes live in a side table
//! (`Graph::shapes`) filled by the lowering pass; spans live next to the item they locate so
//! every diagnostic can point at the user's token.

use std::fmt;

use proc_macro2::Span;

use crate::syntax::TypeKind;

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

/// A static shape: `[N, C, H, W]` for feature maps, `[N, C]` for vectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    pub kind: TypeKind,
    pub dims: Vec<usize>,
}

impl Shape {
    pub fn fm(n: usize, c: usize, h: usize, w: usize) -> Shape {
        Shape {
            kind: TypeKind::Fm,
            dims: vec![n, c, h, w],
        }
    }
    pub fn vec(n: usize, c: usize) -> Shape {
        Shape {
            kind: TypeKind::Vec,
            dims: vec![n, c],
        }
    }
    pub fn elements(&self) -> usize {
        self.dims.iter().product()
    }
    pub fn batch(&self) -> usize {
        self.dims[0]
    }
    pub fn channels(&self) -> usize {
        self.dims[1]
    }
    /// Height and width of a feature map; `[1, 1]` for a vector.
    pub fn spatial(&self) -> [usize; 2] {
        match self.kind {
            TypeKind::Fm => [self.dims[2], self.dims[3]],
            TypeKind::Vec => [1, 1],
        }
    }
}

/// Printed in the DSL's own notation, so messages read like the user's code.
impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            TypeKind::Fm => write!(
                f,
                "fm<{}xf32[{},{}]",
                self.dims[1], self.dims[2], self.dims[3]
            )?,
            TypeKind::Vec => write!(f, "vec<{}xf32", self.dims[1])?,
        }
        if self.dims[0] != 1 {
            write!(f, ", batch = {}", self.dims[0])?;
        }
        f.write_str(">")
    }
}

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

/// Batch-norm statistics: gamma, beta, running mean, running variance.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BnParams {
    pub stats: [ParamId; 4],
    pub eps: f32,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OpKind {
    /// Padding is resolved (no `same` left) by the time an op is in the graph.
    Conv2d {
        weight: ParamId,
        bias: Option<ParamId>,
        kernel: [usize; 2],
        stride: [usize; 2],
        dilation: [usize; 2],
        pad: [usize; 4],
        groups: usize,
        /// A batch norm folded into the weights when the model is loaded.
        bn: Option<BnParams>,
        act: Act,
    },
    Dense {
        weight: ParamId,
        bias: Option<ParamId>,
        bn: Option<BnParams>,
        act: Act,
    },
    BatchNorm {
        bn: BnParams,
        act: Act,
    },
    Unary(Act),
    Binary(BinOp),
    Pool {
        kind: PoolKind,
        kernel: [usize; 2],
        stride: [usize; 2],
        pad: [usize; 4],
        count_include_pad: bool,
    },
    GlobalAvgPool,
    Concat,
    /// `flatten` and `reshape`: the same bytes under another shape (an alias, no kernel).
    Reshape,
    Softmax,
    Pad {
        pad: [usize; 4],
        value: f32,
    },
    /// Copies a value into the arena (an output that would otherwise be an input's bytes).
    Copy,
}

impl OpKind {
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Conv2d { .. } => "conv2d",
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
            OpKind::Concat => "concat",
            OpKind::Reshape => "reshape",
            OpKind::Softmax => "softmax",
            OpKind::Pad { .. } => "pad",
            OpKind::Copy => "copy",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Op {
    pub kind: OpKind,
    pub args: Vec<ValueId>,
    pub result: ValueId,
    /// The op's name token in the user's code.
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Producer {
    Input(usize),
    Op(OpId),
}

#[derive(Clone, Debug)]
pub struct Value {
    pub producer: Producer,
    /// The user's name for it (`let h = ...`), if any; used in printed plans.
    pub name: Option<String>,
    pub span: Span,
}

/// One tensor read from the weights file.
#[derive(Clone, Debug)]
pub struct Param {
    /// Its key in the safetensors file, e.g. `conv1.weight`.
    pub key: String,
    pub shape: Vec<usize>,
    /// The parameter's name token, and its type (where shape errors point).
    pub name_span: Span,
    pub ty_span: Span,
    pub ty_end: Span,
}

#[derive(Clone, Debug)]
pub struct Input {
    pub name: String,
    pub value: ValueId,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Output {
    pub value: ValueId,
    /// The declared type in the signature.
    pub ty_span: Span,
}

#[derive(Clone, Debug, Default)]
pub struct Graph {
    pub inputs: Vec<Input>,
    pub values: Vec<Value>,
    pub ops: Vec<Op>,
    pub params: Vec<Param>,
    pub outputs: Vec<Output>,
    /// Side table: the shape of every value, indexed by `ValueId`.
    pub shapes: Vec<Shape>,
}

impl Graph {
    pub fn shape(&self, v: ValueId) -> &Shape {
        &self.shapes[v.index()]
    }
    pub fn op(&self, id: OpId) -> &Op {
        &self.ops[id.index()]
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
    /// Appends a value; the caller appends its producer.
    pub fn add_value(&mut self, producer: Producer, shape: Shape, span: Span) -> ValueId {
        let id = ValueId(self.values.len() as u32);
        self.values.push(Value {
            producer,
            name: None,
            span,
        });
        self.shapes.push(shape);
        id
    }
    pub fn add_op(
        &mut self,
        kind: OpKind,
        args: Vec<ValueId>,
        shape: Shape,
        span: Span,
    ) -> ValueId {
        let op = OpId(self.ops.len() as u32);
        let result = self.add_value(Producer::Op(op), shape, span);
        self.ops.push(Op {
            kind,
            args,
            result,
            span,
        });
        result
    }
}
