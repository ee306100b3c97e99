//! Storage for data-dependent values: tensors whose size is known only at run time (the result
//! of `nonzero`, of a `slice` with run-time bounds, and what is computed from them).
//!
//! The static part of a model lives in the planned arena. A data-dependent value lives in a
//! [`DynBuf`] the model owns, one per such value, which **grows only**: a run that needs more
//! room than any earlier one allocates (fallibly, an `Err` if memory runs out), and every other
//! run reuses the bytes it has, so a second run with equal or smaller sizes allocates nothing
//! (MegCC's dynamic-shape design). The buffer also records the value's run-time shape, which
//! outputs borrow. A sequence whose length or element sizes are decided at run time lives in a
//! `DynBuf` too, as its elements' values one after the other plus a table of their places and
//! shapes (`runseq.rs`), both grow-only.

use crate::tensor::Scalar;
use crate::Error;

/// The most dimensions a run-time shape may have (the IR's limit).
pub(crate) const MAX_RANK: usize = 8;

/// A grow-only buffer for one data-dependent value, and its run-time shape.
#[derive(Debug, Default)]
pub struct DynBuf {
    /// 8-byte words, so that every element type is aligned.
    pub(crate) words: Vec<u64>,
    shape: [usize; MAX_RANK],
    rank: usize,
    /// For a run-time sequence: its elements, in order (cleared, never shrunk, per run).
    pub(crate) elems: Vec<Entry>,
    /// For a run-time sequence: the words its elements use, from the start of `words`.
    pub(crate) used: usize,
}

/// Where one element of a run-time sequence is in its buffer, and its shape.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Entry {
    /// The first word.
    pub start: usize,
    /// How many values.
    pub len: usize,
    pub shape: [usize; MAX_RANK],
    pub rank: usize,
}

impl DynBuf {
    /// An empty buffer (allocates nothing).
    pub const fn new() -> Self {
        DynBuf {
            words: Vec::new(),
            shape: [0; MAX_RANK],
            rank: 0,
            elems: Vec::new(),
            used: 0,
        }
    }

    /// Records `shape` and returns room for `len` values of `T`, growing the buffer only if it
    /// has never been this large. The contents are whatever the last run left.
    pub fn ensure<T: Scalar>(&mut self, len: usize, shape: &[usize]) -> Result<&mut [T], Error> {
        self.set_shape(shape);
        let bytes = len
            .checked_mul(core::mem::size_of::<T>())
            .ok_or(Error::OutOfMemory { bytes: usize::MAX })?;
        let words = bytes.div_ceil(8);
        if self.words.len() < words {
            self.words
                .try_reserve_exact(words - self.words.len())
                .map_err(|_| Error::OutOfMemory { bytes })?;
            self.words.resize(words, 0);
        }
        let all: &mut [T] = bytemuck::cast_slice_mut(&mut self.words[..]);
        Ok(&mut all[..len])
    }

    /// Records the value's shape (for a view of another buffer's bytes: a reshape).
    pub fn set_shape(&mut self, shape: &[usize]) {
        assert!(
            shape.len() <= MAX_RANK,
            "kiln internal error: rank {} above {MAX_RANK}",
            shape.len()
        );
        self.shape[..shape.len()].copy_from_slice(shape);
        self.rank = shape.len();
    }

    /// The first `len` values of `T` the last `ensure` made room for.
    ///
    /// # Panics
    ///
    /// If the buffer holds fewer, which the generated code rules out ("internal error").
    pub fn view<T: Scalar>(&self, len: usize) -> &[T] {
        let all: &[T] = bytemuck::cast_slice(&self.words[..]);
        match all.get(..len) {
            Some(v) => v,
            None => panic!("kiln internal error: a run-time buffer holds fewer than {len} values"),
        }
    }

    /// The shape recorded last.
    pub fn shape(&self) -> &[usize] {
        &self.shape[..self.rank]
    }

    /// Bytes the buffer holds now (its high-water mark).
    pub fn capacity_bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// ONNX `Slice` bounds at run time, for step 1 on an axis of size `dim`: the first index and the
/// count, with ONNX's clamping (negative bounds count from the end).
pub fn slice_bounds(start: i64, end: i64, dim: usize) -> (usize, usize) {
    let d = i64::try_from(dim).unwrap_or(i64::MAX);
    let wrap = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let s = wrap(start).clamp(0, d);
    let e = wrap(end).clamp(0, d);
    (s as usize, if e > s { (e - s) as usize } else { 0 })
}

/// ONNX `Range`'s element count, `max(ceil((limit - start) / delta), 0)`, for integers; a zero
/// step, or a count that does not fit `usize`, is an `Err`.
pub fn range_count_i64(start: i64, limit: i64, delta: i64) -> Result<usize, Error> {
    if delta == 0 {
        return Err(Error::RangeStep);
    }
    let span = i128::from(limit) - i128::from(start);
    let d = i128::from(delta);
    // Ceiling division with the sign of the step.
    let n = if (span > 0) == (d > 0) && span != 0 {
        (span + d - d.signum()) / d
    } else {
        0
    };
    usize::try_from(n).map_err(|_| Error::OutOfMemory { bytes: usize::MAX })
}

/// [`range_count_i64`] for floats (a NaN or infinite bound or step is an `Err`).
pub fn range_count_f64(start: f64, limit: f64, delta: f64) -> Result<usize, Error> {
    let n = ((limit - start) / delta).ceil();
    if delta == 0.0 || !n.is_finite() {
        return Err(Error::RangeStep);
    }
    if n <= 0.0 {
        return Ok(0);
    }
    if n >= usize::MAX as f64 {
        return Err(Error::OutOfMemory { bytes: usize::MAX });
    }
    Ok(n as usize)
}

/// The sizes of a `split` with run-time sizes, checked: none negative, and they add up to the
/// axis (`dim`).
pub fn split_sizes<const N: usize>(sizes: &[i64], dim: usize) -> Result<[usize; N], Error> {
    let mut out = [0usize; N];
    let mut sum: i128 = 0;
    for (o, &s) in out.iter_mut().zip(sizes) {
        sum += i128::from(s);
        *o = usize::try_from(s).map_err(|_| Error::SplitSizes {
            sizes: sizes.to_vec(),
            dim,
        })?;
    }
    if sizes.len() != N || sum != dim as i128 {
        return Err(Error::SplitSizes {
            sizes: sizes.to_vec(),
            dim,
        });
    }
    Ok(out)
}

/// Element strides of an operand of sizes `dims` broadcast to `out` (same rank), 0 where it is
/// broadcast: run-time geometry for the rank-N kernels.
pub fn broadcast_strides<const R: usize>(dims: [usize; R], out: [usize; R]) -> [usize; R] {
    let mut st = [0; R];
    let mut acc = 1;
    for i in (0..R).rev() {
        st[i] = if dims[i] == 1 && out[i] != 1 { 0 } else { acc };
        acc *= dims[i];
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_only() {
        let mut b = DynBuf::new();
        assert_eq!(b.capacity_bytes(), 0);
        b.ensure::<f32>(10, &[10]).unwrap().fill(1.0);
        assert_eq!(b.capacity_bytes(), 40);
        assert_eq!(b.shape(), &[10]);
        b.ensure::<f32>(3, &[3, 1]).unwrap();
        assert_eq!(b.capacity_bytes(), 40, "never shrinks");
        assert_eq!(b.shape(), &[3, 1]);
        assert_eq!(b.view::<f32>(3), &[1.0; 3]);
        b.ensure::<i64>(7, &[7]).unwrap();
        assert_eq!(b.capacity_bytes(), 56);
        assert!(b.ensure::<f64>(usize::MAX / 4, &[1]).is_err());
    }

    #[test]
    fn slice_bounds_clamp_as_onnx_does() {
        assert_eq!(slice_bounds(2, 7, 10), (2, 5));
        assert_eq!(slice_bounds(0, 10, 10), (0, 10));
        assert_eq!(slice_bounds(-3, 100, 10), (7, 3));
        assert_eq!(slice_bounds(5, 5, 10), (5, 0));
        assert_eq!(slice_bounds(8, 2, 10), (8, 0));
        assert_eq!(slice_bounds(i64::MIN, i64::MAX, 10), (0, 10));
    }

    #[test]
    fn range_counts_follow_onnx() {
        assert_eq!(range_count_i64(0, 10, 3), Ok(4));
        assert_eq!(range_count_i64(10, 0, -3), Ok(4));
        assert_eq!(range_count_i64(0, 10, -1), Ok(0));
        assert_eq!(range_count_i64(5, 5, 1), Ok(0));
        assert_eq!(range_count_i64(1, 2, 0), Err(Error::RangeStep));
        assert_eq!(range_count_f64(0.0, 1.0, 0.25), Ok(4));
        assert_eq!(range_count_f64(0.0, 1.0, 0.3), Ok(4));
        assert!(range_count_f64(0.0, f64::NAN, 1.0).is_err());
    }

    #[test]
    fn split_sizes_must_add_up() {
        assert_eq!(split_sizes::<2>(&[2, 4], 6), Ok([2, 4]));
        assert_eq!(split_sizes::<2>(&[0, 6], 6), Ok([0, 6]));
        assert!(split_sizes::<2>(&[3, 4], 6).is_err());
        assert!(split_sizes::<2>(&[-1, 7], 6).is_err());
    }

    #[test]
    fn strides_mark_broadcast_axes() {
        assert_eq!(broadcast_strides([3, 1], [3, 4]), [1, 0]);
        assert_eq!(broadcast_strides([1, 4], [3, 4]), [0, 1]);
        assert_eq!(broadcast_strides([3, 4], [3, 4]), [4, 1]);
    }
}
