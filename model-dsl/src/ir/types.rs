//! The IR's types: element types, dimensions (known sizes or named symbols, never a sentinel),
//! declared tensor types, and the concrete shapes inference assigns.
//!
//! A declared [`TensorType`] is what a front end read (an input's `tensor<f32[n, 3, ?]>`, a
//! parameter's shape); its dimensions may be symbols. Inference binds the symbols (one binding
//! per precompiled shape variant) and gives every value a concrete [`Shape`]. Both remember
//! whether the user wrote a feature map (`fm`), a vector (`vec`) or a general tensor, only so
//! that messages print types the way the user wrote them; equality of shapes ignores it.

use std::fmt;

/// The most dimensions a tensor may have.
pub const MAX_RANK: usize = 8;

/// Element types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DType {
    F32,
    F64,
    I64,
    I32,
    U8,
    /// One byte per element, 0 or 1 (as ONNX stores it).
    Bool,
}

impl DType {
    pub const ALL: [DType; 6] = [
        DType::F32,
        DType::F64,
        DType::I64,
        DType::I32,
        DType::U8,
        DType::Bool,
    ];

    /// The DSL's spelling, also used in messages.
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::I32 => "i32",
            DType::U8 => "u8",
            DType::Bool => "bool",
        }
    }

    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::U8 | DType::Bool => 1,
        }
    }

    /// The dtype's name in a safetensors header.
    pub const fn safetensors_name(self) -> &'static str {
        match self {
            DType::F32 => "F32",
            DType::F64 => "F64",
            DType::I64 => "I64",
            DType::I32 => "I32",
            DType::U8 => "U8",
            DType::Bool => "BOOL",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A symbol standing for a size, named by the user (`n` in `tensor<f32[n, 3]>`). The index is
/// into [`crate::ir::Graph::symbols`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymId(pub u32);

impl SymId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One dimension of a declared type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    Known(usize),
    Sym(SymId),
    /// `?`: decided at run time (a data-dependent size; allowed on outputs).
    Any,
}

/// How the user wrote a type; only for printing it back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `fm<C x dtype [spatial...]>`: `[N, C, spatial...]`.
    Fm,
    /// `vec<C x dtype>`: `[N, C]`.
    Vec,
    /// `tensor<dtype[dims]>`.
    Tensor,
}

/// A type as declared: dtype and dimensions, some possibly symbolic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorType {
    pub dtype: DType,
    pub dims: Vec<Dim>,
    pub kind: Kind,
}

impl TensorType {
    /// The concrete shape, if no dimension is symbolic.
    pub fn known(&self) -> Option<Shape> {
        self.bind(&[])
    }

    /// The concrete shape with each symbol `SymId(i)` standing for `binding[i]`; `None` if a
    /// symbol has no value.
    pub fn bind(&self, binding: &[usize]) -> Option<Shape> {
        let dims = self
            .dims
            .iter()
            .map(|d| match d {
                Dim::Known(n) => Some(*n),
                Dim::Sym(s) => binding.get(s.index()).copied(),
                Dim::Any => None,
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Shape::new(self.dtype, dims, self.kind))
    }
}

/// A concrete shape: what inference assigns to every value.
///
/// A *data-dependent* value (the result of `nonzero`, of a `slice` with run-time bounds, and
/// whatever is computed from them) has sizes known only at run time: `run[i]` is then
/// `Some(k)`, the run-time size variable `k` the generated code computes, and `dims[i]` is an
/// upper bound. `run` is empty for a static shape.
#[derive(Clone, Debug, Eq)]
pub struct Shape {
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub kind: Kind,
    pub run: Vec<Option<u32>>,
}

/// Shapes are equal when dtype and dimensions are: `fm<16xf32[8,8]>` is
/// `tensor<f32[1,16,8,8]>`.
impl PartialEq for Shape {
    fn eq(&self, other: &Shape) -> bool {
        self.dtype == other.dtype && self.dims == other.dims && self.run == other.run
    }
}

impl Shape {
    pub fn new(dtype: DType, dims: Vec<usize>, kind: Kind) -> Shape {
        Shape {
            dtype,
            dims,
            kind,
            run: Vec::new(),
        }
    }
    pub fn fm(n: usize, c: usize, h: usize, w: usize) -> Shape {
        Shape::new(DType::F32, vec![n, c, h, w], Kind::Fm)
    }
    pub fn vec(n: usize, c: usize) -> Shape {
        Shape::new(DType::F32, vec![n, c], Kind::Vec)
    }
    pub fn tensor(dtype: DType, dims: Vec<usize>) -> Shape {
        Shape::new(dtype, dims, Kind::Tensor)
    }
    /// Whether some size is known only at run time.
    pub fn is_dynamic(&self) -> bool {
        self.run.iter().any(Option::is_some)
    }
    /// The run-time size variable of dimension `i`, if it has one.
    pub fn run_dim(&self, i: usize) -> Option<u32> {
        self.run.get(i).copied().flatten()
    }
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    pub fn elements(&self) -> usize {
        self.dims.iter().product()
    }
    /// Bytes of the data, unaligned.
    pub fn bytes(&self) -> usize {
        self.elements() * self.dtype.size()
    }
    pub fn batch(&self) -> usize {
        self.dims.first().copied().unwrap_or(1)
    }
    pub fn channels(&self) -> usize {
        self.dims.get(1).copied().unwrap_or(1)
    }
    /// The sizes after batch and channels: `[H, W]` of a 2-D feature map.
    pub fn spatial_dims(&self) -> &[usize] {
        self.dims.get(2..).unwrap_or(&[])
    }
    /// Height and width of a rank-4 feature map; `[1, 1]` for a vector (and `[1, L]` for a rank-3
    /// one, which the 2-D kernels run as a map of height 1).
    pub fn spatial(&self) -> [usize; 2] {
        match self.spatial_dims() {
            [h, w] => [*h, *w],
            [w] => [1, *w],
            _ => [1, 1],
        }
    }
    /// The same dims under another kind (for printing).
    pub fn with_kind(mut self, kind: Kind) -> Shape {
        self.kind = kind;
        self
    }
}

/// Printed in the DSL's own notation, so messages read like the user's code.
impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.dims;
        let dt = self.dtype;
        match self.kind {
            Kind::Fm if d.len() >= 3 => {
                write!(f, "fm<{}x{dt}[", d[1])?;
                for (i, s) in d[2..].iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{s}")?;
                }
                f.write_str("]")?;
            }
            Kind::Vec if d.len() == 2 => write!(f, "vec<{}x{dt}", d[1])?,
            _ => {
                write!(f, "tensor<{dt}[")?;
                for (i, s) in d.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if self.run_dim(i).is_some() {
                        f.write_str("?")?;
                    } else {
                        write!(f, "{s}")?;
                    }
                }
                return f.write_str("]>");
            }
        }
        if d[0] != 1 {
            write!(f, ", batch = {}", d[0])?;
        }
        f.write_str(">")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_print_as_written() {
        assert_eq!(Shape::fm(1, 3, 8, 8).to_string(), "fm<3xf32[8,8]>");
        assert_eq!(Shape::vec(4, 10).to_string(), "vec<10xf32, batch = 4>");
        assert_eq!(
            Shape::tensor(DType::I64, vec![]).to_string(),
            "tensor<i64[]>"
        );
        assert_eq!(
            Shape::tensor(DType::U8, vec![2, 3]).to_string(),
            "tensor<u8[2,3]>"
        );
    }

    #[test]
    fn equality_ignores_the_spelling() {
        let fm = Shape::fm(1, 16, 8, 8);
        assert_eq!(fm, Shape::tensor(DType::F32, vec![1, 16, 8, 8]));
        assert_ne!(fm, Shape::tensor(DType::F64, vec![1, 16, 8, 8]));
    }

    #[test]
    fn dtypes_round_trip() {
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.name()), Some(d));
        }
    }
}
