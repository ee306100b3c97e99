//! Run-time sequences: sequences whose length or element sizes are decided at run time (a
//! `split_to_seq` with sizes given as an `i64` tensor, a sequence input of any length, and
//! what `insert`/`erase` make of them).
//!
//! The compiler plans every other sequence at compile time, as arena tensors. These cannot be:
//! their number of elements is data. Each such sequence value lives in a [`DynBuf`] the model
//! owns, as its elements' values one after the other (each starting on an 8-byte word) plus a
//! table of where each element starts and its shape. Both only grow: a run clears them and
//! writes again within the capacity earlier runs left, so a second run with the same or
//! smaller sequences allocates nothing. Elements are *copied* in (onnx-mlir's rule for
//! sequences), so no arena tensor escapes into a run-time sequence and the memory plan's escape
//! rule has nothing to add for them. Every position and size is checked here and is an `Err`,
//! never a panic.
//!
//! For users: [`AsSeq`] is what a sequence input of any length accepts, and [`RunSeq`] is a
//! returned run-time sequence, borrowed from the model's buffer.

use crate::dynamic::{DynBuf, Entry, MAX_RANK};
use crate::seq::seq_index;
use crate::{Error, Scalar, Seq, SeqBuf, Tensor};

/// A sequence of tensors a model takes as an input of any length (`s: seq<tensor<f32[?,4]>>`):
/// a [`Seq`], an array, `Vec` or slice of [`Tensor`]s, or a [`SeqBuf`].
pub trait AsSeq<T: Scalar> {
    /// How many elements.
    fn seq_len(&self) -> usize;
    /// Element `i` (`0..seq_len()`).
    fn tensor(&self, i: usize) -> Option<Tensor<'_, T>>;
}

impl<T: Scalar, const N: usize> AsSeq<T> for Seq<'_, T, N> {
    fn seq_len(&self) -> usize {
        N
    }
    fn tensor(&self, i: usize) -> Option<Tensor<'_, T>> {
        self.at(i64::try_from(i).ok()?)
    }
}

impl<T: Scalar, const N: usize> AsSeq<T> for [Tensor<'_, T>; N] {
    fn seq_len(&self) -> usize {
        N
    }
    fn tensor(&self, i: usize) -> Option<Tensor<'_, T>> {
        self.get(i).copied()
    }
}

impl<T: Scalar> AsSeq<T> for &[Tensor<'_, T>] {
    fn seq_len(&self) -> usize {
        self.len()
    }
    fn tensor(&self, i: usize) -> Option<Tensor<'_, T>> {
        self.get(i).copied()
    }
}

impl<T: Scalar> AsSeq<T> for Vec<Tensor<'_, T>> {
    fn seq_len(&self) -> usize {
        self.len()
    }
    fn tensor(&self, i: usize) -> Option<Tensor<'_, T>> {
        self.get(i).copied()
    }
}

impl<T: Scalar> AsSeq<T> for SeqBuf<T> {
    fn seq_len(&self) -> usize {
        self.len()
    }
    fn tensor(&self, i: usize) -> Option<Tensor<'_, T>> {
        self.at(i64::try_from(i).ok()?)
    }
}

/// A returned run-time sequence: its tensors borrowed from the model's buffer (no allocation).
/// Positions may be negative, counting from the end, as in Python.
#[derive(Clone, Copy, Debug)]
pub struct RunSeq<'a, T: Scalar> {
    buf: &'a DynBuf,
    _t: core::marker::PhantomData<T>,
}

impl<'a, T: Scalar> RunSeq<'a, T> {
    /// The sequence `buf` holds (generated code guarantees its elements are `T`s).
    pub fn new(buf: &'a DynBuf) -> Self {
        RunSeq {
            buf,
            _t: core::marker::PhantomData,
        }
    }
    pub fn len(&self) -> usize {
        self.buf.seq_len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The element at `pos` (`-len..len`), or `None`.
    pub fn at(&self, pos: i64) -> Option<Tensor<'a, T>> {
        let i = seq_index("at", self.len(), pos).ok()?;
        let (v, s) = self.buf.seq_get::<T>(i);
        Some(Tensor::new(v, s))
    }
    pub fn iter(&self) -> impl Iterator<Item = Tensor<'a, T>> + '_ {
        (0..self.len()).filter_map(|i| self.at(i64::try_from(i).ok()?))
    }
    /// The sequence as one safetensors file, its elements named `<name>.0`, `<name>.1`, ...
    pub fn to_safetensors(&self, name: &str) -> Result<Vec<u8>, Error> {
        crate::seq::save(name, self.iter())
    }
}

impl<T: Scalar> AsSeq<T> for RunSeq<'_, T> {
    fn seq_len(&self) -> usize {
        self.len()
    }
    fn tensor(&self, i: usize) -> Option<Tensor<'_, T>> {
        self.at(i64::try_from(i).ok()?)
    }
}

impl DynBuf {
    /// Empties the sequence this buffer holds (keeping its capacity).
    fn seq_clear(&mut self) {
        self.elems.clear();
        self.used = 0;
    }

    /// Appends an element of `shape` and returns room for its values, growing the buffer only
    /// past its high-water mark.
    fn seq_room<T: Scalar>(&mut self, shape: &[usize]) -> Result<&mut [T], Error> {
        let too_big = Error::OutOfMemory { bytes: usize::MAX };
        if shape.len() > MAX_RANK {
            return Err(too_big);
        }
        let len = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or(too_big.clone())?;
        let bytes = len
            .checked_mul(core::mem::size_of::<T>())
            .ok_or(too_big.clone())?;
        let start = self.used;
        let end = start.checked_add(bytes.div_ceil(8)).ok_or(too_big)?;
        if self.words.len() < end {
            // Amortized growth: a sequence is filled one element at a time.
            self.words
                .try_reserve(end - self.words.len())
                .map_err(|_| Error::OutOfMemory { bytes })?;
            self.words.resize(end, 0);
        }
        self.elems
            .try_reserve(1)
            .map_err(|_| Error::OutOfMemory { bytes })?;
        let mut e = Entry {
            start,
            len,
            rank: shape.len(),
            ..Entry::default()
        };
        e.shape[..shape.len()].copy_from_slice(shape);
        self.elems.push(e);
        self.used = end;
        let room: &mut [T] = bytemuck::cast_slice_mut(&mut self.words[start..end]);
        Ok(&mut room[..len])
    }

    /// Appends a copy of `values`, an element of `shape`.
    fn seq_push<T: Scalar>(&mut self, values: &[T], shape: &[usize]) -> Result<(), Error> {
        let room = self.seq_room::<T>(shape)?;
        match values.get(..room.len()) {
            Some(v) if v.len() == values.len() => {
                room.copy_from_slice(v);
                Ok(())
            }
            _ => Err(Error::SeqElement {
                seq: "insert",
                index: 0,
                expected: "as many values as its shape says",
                shape: shape.to_vec(),
            }),
        }
    }

    /// The number of elements of the sequence this buffer holds.
    pub fn seq_len(&self) -> usize {
        self.elems.len()
    }

    /// Element `i`'s values and shape.
    ///
    /// # Panics
    ///
    /// If there is no element `i`, which callers rule out ("internal error").
    fn seq_get<T: Scalar>(&self, i: usize) -> (&[T], &[usize]) {
        let Some(e) = self.elems.get(i) else {
            panic!("kiln internal error: a run-time sequence has no element {i}")
        };
        let words = (e.len * core::mem::size_of::<T>()).div_ceil(8);
        let all: &[T] = bytemuck::cast_slice(&self.words[e.start..e.start + words]);
        (&all[..e.len], &e.shape[..e.rank])
    }
}

/// Whether `shape` has the element type `dims` (`None`: any size).
fn fits(shape: &[usize], dims: &[Option<usize>]) -> bool {
    shape.len() == dims.len()
        && shape
            .iter()
            .zip(dims)
            .all(|(s, d)| d.is_none_or(|d| d == *s))
}

/// Fills `out` with copies of the tensors of the input sequence `src`, each checked against the
/// declared element type `dims` (`ty` is its text, for the error).
pub fn run_seq_input<T: Scalar>(
    out: &mut DynBuf,
    name: &'static str,
    ty: &'static str,
    dims: &[Option<usize>],
    src: &dyn AsSeq<T>,
) -> Result<(), Error> {
    out.seq_clear();
    for i in 0..src.seq_len() {
        let bad = |shape: &[usize]| Error::SeqElement {
            seq: name,
            index: i,
            expected: ty,
            shape: shape.to_vec(),
        };
        let Some(t) = src.tensor(i) else {
            return Err(bad(&[]));
        };
        let n: Option<usize> = t.shape().iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if !fits(t.shape(), dims) || n != Some(t.as_slice().len()) {
            return Err(bad(t.shape()));
        }
        out.seq_push(t.as_slice(), t.shape())?;
    }
    Ok(())
}

/// `split_to_seq` with sizes given at run time: the pieces of `x` (of `shape`) along `axis`,
/// copied into `out`. Negative sizes, or sizes that do not add up to the axis, are an `Err`.
pub fn run_seq_split<T: Scalar>(
    out: &mut DynBuf,
    x: &[T],
    shape: &[usize],
    axis: usize,
    sizes: &[i64],
) -> Result<(), Error> {
    let dim = shape.get(axis).copied().unwrap_or(0);
    let bad = || Error::SplitSizes {
        sizes: sizes.to_vec(),
        dim,
    };
    let sum: i128 = sizes.iter().map(|&s| i128::from(s)).sum();
    if sizes.iter().any(|&s| s < 0) || sum != dim as i128 || shape.len() > MAX_RANK {
        return Err(bad());
    }
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let total = dim * inner;
    if x.len() != outer * total {
        return Err(bad());
    }
    out.seq_clear();
    let mut piece = [0usize; MAX_RANK];
    piece[..shape.len()].copy_from_slice(shape);
    let mut offset = 0;
    for &s in sizes {
        let s = s as usize;
        piece[axis] = s;
        let room = out.seq_room::<T>(&piece[..shape.len()])?;
        kiln_kernels::copy_from_axis(outer, s * inner, total, offset, x, room);
        offset += s * inner;
    }
    Ok(())
}

/// `insert`: `src` with `x` (of `shape`) at `pos` (`-len..=len`; `None`: the end), into `out`.
pub fn run_seq_insert<T: Scalar>(
    out: &mut DynBuf,
    src: &DynBuf,
    x: &[T],
    shape: &[usize],
    pos: Option<i64>,
) -> Result<(), Error> {
    let n = src.seq_len();
    let bad = || Error::SeqPosition {
        op: "insert",
        pos: pos.unwrap_or(0),
        len: n,
    };
    // `-len..=len`: one more position than `at` takes (`len`, the end).
    let p = match pos.map(i128::from) {
        None => n,
        Some(p) => {
            let q = if p < 0 { p + n as i128 } else { p };
            usize::try_from(q)
                .ok()
                .filter(|&q| q <= n)
                .ok_or_else(bad)?
        }
    };
    out.seq_clear();
    for i in 0..=n {
        if i == p {
            out.seq_push(x, shape)?;
        }
        if i < n {
            let (v, s) = src.seq_get::<T>(i);
            out.seq_push(v, s)?;
        }
    }
    Ok(())
}

/// `erase`: `src` without the element at `pos` (`-len..len`; `None`: the last), into `out`.
pub fn run_seq_erase<T: Scalar>(
    out: &mut DynBuf,
    src: &DynBuf,
    pos: Option<i64>,
) -> Result<(), Error> {
    let n = src.seq_len();
    let p = seq_index("erase", n, pos.unwrap_or(-1))?;
    out.seq_clear();
    for i in (0..n).filter(|&i| i != p) {
        let (v, s) = src.seq_get::<T>(i);
        out.seq_push(v, s)?;
    }
    Ok(())
}

/// `at`: the values and shape of the element at `pos` (`-len..len`), checked against the
/// element type `dims` the compiler works with.
pub fn run_seq_at<'a, T: Scalar>(
    src: &'a DynBuf,
    pos: i64,
    dims: &[Option<usize>],
) -> Result<(&'a [T], &'a [usize]), Error> {
    let i = seq_index("at", src.seq_len(), pos)?;
    let (v, s) = src.seq_get::<T>(i);
    if !fits(s, dims) {
        return Err(Error::SeqElement {
            seq: "at",
            index: i,
            expected: "the sequence's element type",
            shape: s.to_vec(),
        });
    }
    Ok((v, s))
}

/// `concat_from_seq`: the elements of `src` joined along `axis` (or stacked along a new axis
/// there) into `out`. `dims` is the element shape (its size along a joined axis is ignored).
/// Returns the result's size along `axis`.
pub fn run_seq_concat<T: Scalar>(
    out: &mut DynBuf,
    src: &DynBuf,
    axis: usize,
    new_axis: bool,
    dims: &[usize],
) -> Result<usize, Error> {
    let n = src.seq_len();
    let rank = dims.len() + usize::from(new_axis);
    // The compiler passes a valid axis; anything else is refused rather than indexed.
    if rank > MAX_RANK || axis >= rank {
        return Err(Error::OutOfMemory { bytes: usize::MAX });
    }
    let mut along = if new_axis { n } else { 0 };
    for i in 0..n {
        let (_, s) = src.seq_get::<T>(i);
        let same = s.len() == dims.len()
            && (0..dims.len()).all(|d| (d == axis && !new_axis) || s[d] == dims[d]);
        if !same {
            return Err(Error::SeqElement {
                seq: "concat_from_seq",
                index: i,
                expected: "the other elements' sizes off the concatenation axis",
                shape: s.to_vec(),
            });
        }
        if !new_axis {
            along += s[axis];
        }
    }
    let mut shape = [0usize; MAX_RANK];
    shape[..axis].copy_from_slice(&dims[..axis]);
    shape[axis] = along;
    let rest = if new_axis { axis } else { axis + 1 };
    shape[axis + 1..rank].copy_from_slice(&dims[rest..]);
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[rest..].iter().product();
    let total = along * inner;
    let y = out.ensure::<T>(outer * total, &shape[..rank])?;
    let mut offset = 0;
    for i in 0..n {
        let (v, s) = src.seq_get::<T>(i);
        let part = if new_axis { inner } else { s[axis] * inner };
        kiln_kernels::copy_into_axis(outer, part, total, offset, v, y);
        offset += part;
    }
    Ok(along)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(b: &mut DynBuf, elems: &[&[f32]]) {
        let shapes: Vec<[usize; 1]> = elems.iter().map(|e| [e.len()]).collect();
        let t: Vec<Tensor<'_, f32>> = elems
            .iter()
            .zip(&shapes)
            .map(|(e, s)| Tensor::new(e, s))
            .collect();
        run_seq_input(b, "s", "tensor<f32[?]>", &[None], &t).unwrap();
    }

    #[test]
    fn insert_erase_at_and_bounds() {
        let mut s = DynBuf::new();
        fill(&mut s, &[&[1.0, 2.0], &[3.0]]);
        let mut t = DynBuf::new();
        run_seq_insert(&mut t, &s, &[9.0f32; 3], &[3], Some(-1)).unwrap();
        let firsts: Vec<f32> = (0..3).map(|i| t.seq_get::<f32>(i).0[0]).collect();
        assert_eq!(firsts, [1.0, 9.0, 3.0]);
        run_seq_insert(&mut t, &s, &[9.0f32], &[1], Some(2)).unwrap();
        assert_eq!(t.seq_get::<f32>(2).0, [9.0]);
        assert!(run_seq_insert(&mut t, &s, &[9.0f32], &[1], Some(3)).is_err());
        assert!(run_seq_insert(&mut t, &s, &[9.0f32], &[1], Some(-3)).is_err());
        run_seq_insert(&mut t, &s, &[9.0f32], &[1], Some(-2)).unwrap();
        assert_eq!(t.seq_get::<f32>(0).0, [9.0]);
        let mut u = DynBuf::new();
        run_seq_erase::<f32>(&mut u, &s, Some(0)).unwrap();
        assert_eq!(u.seq_len(), 1);
        assert_eq!(u.seq_get::<f32>(0).0, [3.0]);
        assert!(run_seq_erase::<f32>(&mut u, &s, Some(2)).is_err());
        let (v, shape) = run_seq_at::<f32>(&s, -2, &[None]).unwrap();
        assert_eq!((v, shape), (&[1.0, 2.0][..], &[2][..]));
        assert!(run_seq_at::<f32>(&s, 2, &[None]).is_err());
        assert!(run_seq_at::<f32>(&s, 0, &[Some(1)]).is_err());
        let mut empty = DynBuf::new();
        fill(&mut empty, &[]);
        assert!(run_seq_erase::<f32>(&mut u, &empty, None).is_err());
    }

    #[test]
    fn split_and_concat_round_trip() {
        let x: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let mut s = DynBuf::new();
        run_seq_split(&mut s, &x, &[2, 6], 1, &[1, 0, 5]).unwrap();
        assert_eq!(s.seq_len(), 3);
        assert_eq!(s.seq_get::<f32>(0), (&[0.0, 6.0][..], &[2, 1][..]));
        assert_eq!(s.seq_get::<f32>(1).1, [2, 0]);
        assert!(run_seq_split(&mut s, &x, &[2, 6], 1, &[7, -1]).is_err());
        assert!(run_seq_split(&mut s, &x, &[2, 6], 1, &[1, 2]).is_err());
        run_seq_split(&mut s, &x, &[2, 6], 1, &[1, 0, 5]).unwrap();
        let mut y = DynBuf::new();
        assert_eq!(run_seq_concat::<f32>(&mut y, &s, 1, false, &[2, 0]), Ok(6));
        assert_eq!(y.view::<f32>(12), &x[..]);
        assert_eq!(y.shape(), [2, 6]);
    }
}
