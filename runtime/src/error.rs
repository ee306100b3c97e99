//! The one error type a kiln model returns at run time.
//!
//! Everything that can go wrong once a model has compiled is a mismatch between what the compiler
//! planned for and what the caller hands over: an input of the wrong length, a byte buffer that
//! cannot be viewed as `f32`s, an arena that is too small, or a weights file that does not match
//! the model. Each message names what was expected *and* what was found, so a user can fix the
//! call without reading kiln's source.
//!
//! Broken compiler invariants (a memory plan that overlaps, a parameter spec out of bounds) are not
//! errors here: they are kiln bugs and panic with an "internal error" message instead.

use core::fmt;

/// A run-time error from a kiln model: bad input, too small an arena, or weights that do not
/// match the model.
///
/// The [`Display`](fmt::Display) text is meant for people and names both what the model expected
/// and what it got; match on the variants to react programmatically. New variants may be added in
/// minor releases.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// An input holds the wrong number of values.
    InputLength {
        /// The input's name in the network declaration.
        name: &'static str,
        /// The input's declared type, as written in the DSL (e.g. `fm<1xf32[8,8]>`).
        ty: &'static str,
        /// Its element type (`f32`, `i64`, ...).
        dtype: &'static str,
        /// How many values the model expects.
        expected: usize,
        /// How many it was given.
        got: usize,
    },
    /// An input given as bytes is not a whole number of values.
    InputNotWhole {
        /// The input's name, when known (it is not inside [`AsInput::values`](crate::AsInput)).
        name: Option<&'static str>,
        /// The byte length that was given.
        bytes: usize,
        /// The element type the bytes should hold.
        dtype: &'static str,
        /// Its size in bytes.
        size: usize,
    },
    /// An input given as bytes does not start on a boundary of its element type's alignment, so
    /// it cannot be viewed as values without copying.
    InputMisaligned {
        /// The input's name, when known (it is not inside [`AsInput::values`](crate::AsInput)).
        name: Option<&'static str>,
        /// How many bytes past the previous boundary the data starts.
        offset: usize,
        /// The alignment the element type needs.
        align: usize,
    },
    /// A caller-provided arena is smaller than the model's memory plan.
    ArenaTooSmall {
        /// Bytes the plan needs, counted from a 64-byte-aligned start.
        needed: usize,
        /// Bytes the caller provided.
        got: usize,
        /// Bytes skipped at the start of the caller's buffer to reach a 64-byte boundary.
        padding: usize,
    },
    /// Memory for the model's buffers could not be allocated.
    OutOfMemory {
        /// The size of the allocation that failed, in bytes (`usize::MAX` if it does not even
        /// fit in `usize`).
        bytes: usize,
    },
    /// The system refused to start a worker thread (`set_threads`, [`Threads::new`](crate::Threads::new)).
    Threads {
        /// The number of threads asked for.
        requested: usize,
        /// What the system reported.
        message: String,
    },
    /// The weights bytes are not a valid safetensors file.
    WeightsFile {
        /// What the safetensors parser reported.
        reason: String,
    },
    /// A tensor the model needs is not in the weights file.
    WeightMissing {
        /// The tensor's name.
        tensor: &'static str,
        /// The shape the model expects.
        shape: &'static [usize],
    },
    /// A tensor in the weights file has another element type than `F32`.
    WeightDtype {
        /// The tensor's name.
        tensor: &'static str,
        /// The dtype the file declares, as safetensors spells it (`F16`, `BF16`, ...).
        dtype: String,
    },
    /// A tensor in the weights file has another shape than the model expects.
    WeightShape {
        /// The tensor's name.
        tensor: &'static str,
        /// The shape the file declares.
        file: Vec<usize>,
        /// The shape the model expects.
        expected: &'static [usize],
    },
    /// The inputs' shapes are none of the shapes the model was compiled for (a model with
    /// several precompiled shapes, `where ... in [...]`).
    UnknownShape {
        /// The first input that matches no variant, with the variants still possible before it.
        name: &'static str,
        /// Its shape, or `[len]` when it was passed without one.
        got: Vec<usize>,
        /// Whether `got` is a shape (`true`) or only an element count.
        with_shape: bool,
        /// That input's shape in each variant the model has.
        listed: Vec<&'static [usize]>,
    },
    /// An index read at run time (by `gather`) is outside the axis it indexes.
    IndexOutOfRange {
        /// The operation, e.g. `gather`.
        op: &'static str,
        /// Where in the indices tensor the bad index is (flat, row-major).
        position: usize,
        /// The index.
        index: i64,
        /// The size of the axis; valid indices are `-len..len`.
        len: usize,
    },
    /// A sequence position given at run time (to `insert`, `erase` or `at`) is outside the
    /// sequence.
    SeqPosition {
        /// The operation: `insert`, `erase` or `at`.
        op: &'static str,
        /// The position given.
        pos: i64,
        /// The sequence's length; valid positions are `-len..len` (`-len..=len` for `insert`).
        len: usize,
    },
    /// An element of a sequence decided at run time does not have the element type: a tensor
    /// of a sequence input of the wrong shape, or (never, if the compiler is right) an element
    /// an op cannot take.
    SeqElement {
        /// The input sequence's name, or the operation.
        seq: &'static str,
        /// The element's position.
        index: usize,
        /// What the element should be (for an input, its declared type, e.g.
        /// `tensor<f32[?,4]>`).
        expected: &'static str,
        /// The element's shape.
        shape: Vec<usize>,
    },
    /// Bytes given as a saved sequence are not one: not a safetensors file, elements missing
    /// or not numbered `<name>.0`, `<name>.1`, ..., or of another dtype than asked for.
    SeqFile {
        /// The sequence's name in the file.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The sizes given to a `split` at run time are negative or do not add up to the axis.
    SplitSizes {
        /// The sizes given.
        sizes: Vec<i64>,
        /// The size of the axis being split.
        dim: usize,
    },
    /// A `range` whose step is zero (or not a number): it would never end.
    RangeStep,
    /// Inputs passed without shapes match several variants by length; pass them with their
    /// shapes (a [`Tensor`](crate::Tensor)) to say which.
    AmbiguousShape {
        /// The matching variants' input shapes.
        candidates: Vec<&'static [&'static [usize]]>,
    },
}

/// Writes `input `name`` or just `input` when the name is not known.
fn input_label(f: &mut fmt::Formatter<'_>, name: Option<&str>) -> fmt::Result {
    match name {
        Some(name) => write!(f, "input `{name}`"),
        None => f.write_str("input"),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::InputLength {
                name,
                ty,
                dtype,
                expected,
                got,
            } => write!(
                f,
                "input `{name}`: expected {expected} {dtype} values ({ty}), got {got}"
            ),
            Error::InputNotWhole {
                name,
                bytes,
                dtype,
                size,
            } => {
                input_label(f, *name)?;
                write!(
                    f,
                    ": {bytes} bytes is not a whole number of {dtype} values ({size} bytes each)"
                )
            }
            Error::InputMisaligned {
                name,
                offset,
                align,
            } => {
                input_label(f, *name)?;
                write!(
                    f,
                    ": bytes start {offset} byte(s) past a {align}-byte boundary, so they cannot \
                     be read in place; copy them into a Vec of the element type first"
                )
            }
            Error::ArenaTooSmall {
                needed,
                got,
                padding,
            } => {
                write!(
                    f,
                    "arena: needs {needed} bytes (64-byte aligned), got {got}"
                )?;
                if *padding > 0 {
                    // Say why a buffer that looks big enough is not: its start had to be moved.
                    write!(
                        f,
                        " ({} after skipping {padding} bytes to reach a 64-byte boundary)",
                        got.saturating_sub(*padding)
                    )?;
                }
                Ok(())
            }
            Error::OutOfMemory { bytes } => write!(
                f,
                "out of memory: cannot allocate {bytes} bytes for the model's buffers"
            ),
            Error::Threads { requested, message } => write!(
                f,
                "threads: cannot start the workers for {requested} threads: {message}"
            ),
            Error::WeightsFile { reason } => {
                write!(f, "weights: not a valid safetensors file: {reason}")
            }
            Error::WeightMissing { tensor, shape } => write!(
                f,
                "weights: tensor `{tensor}` (f32 {shape:?}) is missing from the file"
            ),
            Error::WeightDtype { tensor, dtype } => write!(
                f,
                "weights: tensor `{tensor}` has dtype {dtype} in the file, the model expects F32"
            ),
            Error::WeightShape {
                tensor,
                file,
                expected,
            } => write!(
                f,
                "weights: tensor `{tensor}` has shape {file:?} in the file, the model expects \
                 {expected:?}"
            ),
            Error::UnknownShape {
                name,
                got,
                with_shape,
                listed,
            } => {
                if *with_shape {
                    write!(f, "input `{name}` has shape {got:?}, ")?;
                } else {
                    write!(
                        f,
                        "input `{name}` has {} values, ",
                        got.first().unwrap_or(&0)
                    )?;
                }
                write!(f, "but the model was compiled for the shapes ")?;
                for (i, s) in listed.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{s:?}")?;
                }
                Ok(())
            }
            Error::IndexOutOfRange {
                op,
                position,
                index,
                len,
            } => write!(
                f,
                "{op}: index {index} (at position {position} of the indices) is out of range for \
                 an axis of size {len}; valid indices are {} to {}",
                -(*len as i128),
                *len as i128 - 1
            ),
Error::SeqElement {
                seq,
                index,
                expected,
                shape,
            } => write!(
                f,
                "`{seq}`: element {index} has shape {shape:?}, but the elements are {expected}"
            ),
            Error::SeqFile { name, reason } => {
                write!(f, "the sequence `{name}` cannot be read from these bytes: {reason}")
            }
            Error::SeqPosition { op, pos, len } => {
                let hi = *len as i128 - i128::from(*op != "insert");
                write!(
                    f,
                    "{op}: position {pos} is out of range for a sequence of {len} elements; valid positions are {} to {hi}",
                    -(*len as i128)
                )
            }
            Error::SplitSizes { sizes, dim } => write!(
                f,
                "split: the sizes {sizes:?} must be non-negative and add up to {dim}, the size of the axis"
            ),
            Error::RangeStep => f.write_str("range: the step (delta) is zero or not a number"),
            Error::AmbiguousShape { candidates } => {
                write!(f, "the inputs' lengths fit several compiled shapes (")?;
                for (i, s) in candidates.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{s:?}")?;
                }
                write!(f, "); pass them as kiln::Tensor with their shapes")
            }
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    // The messages are part of the user interface; pin the exact wording the docs promise.
    #[test]
    fn messages_name_expected_and_got() {
        let e = Error::InputLength {
            name: "x",
            ty: "fm<1xf32[8,8]>",
            dtype: "f32",
            expected: 64,
            got: 63,
        };
        assert_eq!(
            e.to_string(),
            "input `x`: expected 64 f32 values (fm<1xf32[8,8]>), got 63"
        );
        let e = Error::ArenaTooSmall {
            needed: 4096,
            got: 1000,
            padding: 0,
        };
        assert_eq!(
            e.to_string(),
            "arena: needs 4096 bytes (64-byte aligned), got 1000"
        );
        let e = Error::ArenaTooSmall {
            needed: 4096,
            got: 4100,
            padding: 8,
        };
        assert_eq!(
            e.to_string(),
            "arena: needs 4096 bytes (64-byte aligned), got 4100 (4092 after skipping 8 bytes \
             to reach a 64-byte boundary)"
        );
        let e = Error::WeightMissing {
            tensor: "fc.bias",
            shape: &[10],
        };
        assert_eq!(
            e.to_string(),
            "weights: tensor `fc.bias` (f32 [10]) is missing from the file"
        );
        let e = Error::OutOfMemory { bytes: 1 << 20 };
        assert_eq!(
            e.to_string(),
            "out of memory: cannot allocate 1048576 bytes for the model's buffers"
        );
        let e = Error::InputNotWhole {
            name: None,
            bytes: 7,
            dtype: "f32",
            size: 4,
        };
        assert_eq!(
            e.to_string(),
            "input: 7 bytes is not a whole number of f32 values (4 bytes each)"
        );
    }
}
