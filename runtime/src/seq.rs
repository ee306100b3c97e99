//! Run-time positions in sequences.
//!
//! Sequences are planned at compile time: their length and the tensors they may hold are known
//! there. What a position given at run time (an `i64` input) can change is only the *order*:
//! generated code keeps it as a fixed-size array of indices into the compile-time list of
//! candidates, and these functions update it. A position outside the sequence is an
//! [`Error::SeqPosition`], never a panic; nothing here allocates.
//!
//! For users: [`Seq`] is a sequence borrowed from wherever its tensors are (a model's arena, or
//! a [`SeqBuf`]), a fixed number of [`Tensor`]s (no allocation), and [`SeqBuf`] an owned one,
//! read from a safetensors file. A sequence saves to and loads from one safetensors file with
//! its elements named `<name>.0`, `<name>.1`, ... (DL4J's "save and load groups of arrays").

use crate::{Error, Scalar, Tensor};
use safetensors::{tensor::TensorView, Dtype, SafeTensors};

/// `pos` (negative counts from the end) as an index into a sequence of `len` elements, for
/// `erase` and `at`: `-len..len`.
pub fn seq_index(op: &'static str, len: usize, pos: i64) -> Result<usize, Error> {
    let n = len as i128;
    let p = if pos < 0 {
        i128::from(pos) + n
    } else {
        i128::from(pos)
    };
    if (0..n).contains(&p) {
        Ok(p as usize)
    } else {
        Err(Error::SeqPosition { op, pos, len })
    }
}

/// The order after inserting candidate `cand` at `pos` (`-len..=len`, `len` the end) of `prev`.
/// `N` is `prev.len() + 1`; the compiler guarantees it.
pub fn seq_insert<const N: usize>(
    prev: &[usize],
    cand: usize,
    pos: i64,
) -> Result<[usize; N], Error> {
    let len = prev.len();
    let n = len as i128;
    let p = if pos < 0 {
        i128::from(pos) + n
    } else {
        i128::from(pos)
    };
    if !(0..=n).contains(&p) || N != len + 1 {
        return Err(Error::SeqPosition {
            op: "insert",
            pos,
            len,
        });
    }
    let p = p as usize;
    Ok(core::array::from_fn(|i| match i.cmp(&p) {
        core::cmp::Ordering::Less => prev[i],
        core::cmp::Ordering::Equal => cand,
        core::cmp::Ordering::Greater => prev[i - 1],
    }))
}

/// The order after erasing position `pos` (`-len..len`) of `prev`. `N` is `prev.len() - 1`.
pub fn seq_erase<const N: usize>(prev: &[usize], pos: i64) -> Result<[usize; N], Error> {
    let p = seq_index("erase", prev.len(), pos)?;
    if N + 1 != prev.len() {
        return Err(Error::SeqPosition {
            op: "erase",
            pos,
            len: prev.len(),
        });
    }
    Ok(core::array::from_fn(|i| {
        if i < p {
            prev[i]
        } else {
            prev[i + 1]
        }
    }))
}

/// A sequence of `N` tensors of one element type, borrowed (from a model's arena for a model's
/// outputs, or from a [`SeqBuf`]). Positions may be negative, counting from the end, as in
/// Python.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seq<'a, T: Scalar, const N: usize> {
    elems: [Tensor<'a, T>; N],
}

impl<'a, T: Scalar, const N: usize> Seq<'a, T, N> {
    pub fn new(elems: [Tensor<'a, T>; N]) -> Self {
        Seq { elems }
    }
    pub fn len(&self) -> usize {
        N
    }
    pub fn is_empty(&self) -> bool {
        N == 0
    }
    /// The element at `pos` (`-N..N`), or `None`.
    pub fn at(&self, pos: i64) -> Option<Tensor<'a, T>> {
        seq_index("at", N, pos).ok().map(|i| self.elems[i])
    }
    pub fn iter(&self) -> impl Iterator<Item = Tensor<'a, T>> + '_ {
        self.elems.iter().copied()
    }
    /// The tensors, in order.
    pub fn tensors(&self) -> [Tensor<'a, T>; N] {
        self.elems
    }
    /// The sequence as one safetensors file, its elements named `<name>.0`, `<name>.1`, ...
    pub fn to_safetensors(&self, name: &str) -> Result<Vec<u8>, Error> {
        save(name, self.iter())
    }
}

/// A sequence that owns its tensors: what [`SeqBuf::from_safetensors`] reads.
#[derive(Clone, Debug, PartialEq)]
pub struct SeqBuf<T: Scalar> {
    data: Vec<T>,
    /// Per element: where its values start in `data`, and its shape.
    elems: Vec<(usize, Vec<usize>)>,
}

impl<T: Scalar> SeqBuf<T> {
    /// Copies `tensors` into one buffer.
    pub fn from_tensors<'t>(tensors: impl IntoIterator<Item = Tensor<'t, T>>) -> Self {
        let mut buf = SeqBuf {
            data: Vec::new(),
            elems: Vec::new(),
        };
        for t in tensors {
            buf.elems.push((buf.data.len(), t.shape().to_vec()));
            buf.data.extend_from_slice(&t);
        }
        buf
    }
    pub fn len(&self) -> usize {
        self.elems.len()
    }
    pub fn is_empty(&self) -> bool {
        self.elems.is_empty()
    }
    /// The element at `pos` (negative counts from the end), or `None`.
    pub fn at(&self, pos: i64) -> Option<Tensor<'_, T>> {
        let i = seq_index("at", self.len(), pos).ok()?;
        let (start, shape) = &self.elems[i];
        let n: usize = shape.iter().product();
        Some(Tensor::new(&self.data[*start..*start + n], shape))
    }
    pub fn iter(&self) -> impl Iterator<Item = Tensor<'_, T>> + '_ {
        (0..self.len() as i64).filter_map(|i| self.at(i))
    }
    /// The sequence as one safetensors file, its elements named `<name>.0`, `<name>.1`, ...
    pub fn to_safetensors(&self, name: &str) -> Result<Vec<u8>, Error> {
        save(name, self.iter())
    }
    /// Reads the sequence `name` from a safetensors file: the tensors `<name>.0`, `<name>.1`,
    /// ... (consecutive from 0; other tensors are ignored), each of dtype `T`. Anything else is
    /// `Err(Error::SeqFile)`.
    pub fn from_safetensors(bytes: &[u8], name: &str) -> Result<Self, Error> {
        let fail = |reason: String| Error::SeqFile {
            name: name.to_string(),
            reason,
        };
        let file = SafeTensors::deserialize(bytes).map_err(|e| fail(e.to_string()))?;
        let prefix = format!("{name}.");
        let mut found: Vec<usize> = Vec::new();
        for key in file.names() {
            let Some(rest) = key.strip_prefix(&prefix) else {
                continue;
            };
            match rest.parse::<usize>() {
                Ok(i) if i.to_string() == rest => found.push(i),
                _ => return Err(fail(format!("`{key}` is not numbered like `{name}.0`"))),
            }
        }
        found.sort_unstable();
        if let Some((k, _)) = found.iter().enumerate().find(|(k, i)| *k != **i) {
            return Err(fail(format!("element `{name}.{k}` is missing")));
        }
        let want = dtype_of::<T>();
        let mut buf = SeqBuf {
            data: Vec::new(),
            elems: Vec::new(),
        };
        for k in 0..found.len() {
            let key = format!("{name}.{k}");
            let view = file.tensor(&key).map_err(|e| fail(e.to_string()))?;
            if view.dtype() != want && !(want == Dtype::U8 && view.dtype() == Dtype::BOOL) {
                return Err(fail(format!(
                    "`{key}` is {} but the sequence holds {}",
                    view.dtype(),
                    T::NAME
                )));
            }
            // The crate checked that the data is exactly the shape's worth of values.
            let start = buf.data.len();
            buf.data
                .extend(view.data().chunks_exact(size_of::<T>()).map(|c| {
                    let mut v = T::zeroed();
                    let b = bytemuck::bytes_of_mut(&mut v);
                    b.copy_from_slice(c);
                    if cfg!(target_endian = "big") {
                        b.reverse();
                    }
                    v
                }));
            buf.elems.push((start, view.shape().to_vec()));
        }
        Ok(buf)
    }
}

/// The safetensors dtype of `T`.
fn dtype_of<T: Scalar>() -> Dtype {
    match T::NAME {
        "f32" => Dtype::F32,
        "f64" => Dtype::F64,
        "i64" => Dtype::I64,
        "i32" => Dtype::I32,
        _ => Dtype::U8,
    }
}

pub(crate) fn save<'t, T: Scalar>(
    name: &str,
    tensors: impl Iterator<Item = Tensor<'t, T>>,
) -> Result<Vec<u8>, Error> {
    let fail = |reason: String| Error::SeqFile {
        name: name.to_string(),
        reason,
    };
    // safetensors stores little-endian values.
    let tensors: Vec<(String, Vec<usize>, Vec<u8>)> = tensors
        .enumerate()
        .map(|(k, t)| {
            let mut bytes = bytemuck::cast_slice::<T, u8>(&t).to_vec();
            if cfg!(target_endian = "big") {
                for c in bytes.chunks_exact_mut(size_of::<T>()) {
                    c.reverse();
                }
            }
            (format!("{name}.{k}"), t.shape().to_vec(), bytes)
        })
        .collect();
    let mut views = Vec::with_capacity(tensors.len());
    for (key, shape, bytes) in &tensors {
        let view = TensorView::new(dtype_of::<T>(), shape.clone(), bytes)
            .map_err(|e| fail(e.to_string()))?;
        views.push((key.as_str(), view));
    }
    safetensors::serialize(views, None).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_and_erase_follow_python() {
        // Python: l = [0, 1, 2]; l.insert(-1, 9) -> [0, 1, 9, 2]
        assert_eq!(seq_insert::<4>(&[0, 1, 2], 9, -1).unwrap(), [0, 1, 9, 2]);
        assert_eq!(seq_insert::<4>(&[0, 1, 2], 9, 3).unwrap(), [0, 1, 2, 9]);
        assert_eq!(seq_insert::<4>(&[0, 1, 2], 9, -3).unwrap(), [9, 0, 1, 2]);
        assert!(seq_insert::<4>(&[0, 1, 2], 9, 4).is_err());
        assert!(seq_insert::<4>(&[0, 1, 2], 9, -4).is_err());
        assert_eq!(seq_erase::<2>(&[0, 1, 2], -3).unwrap(), [1, 2]);
        assert_eq!(seq_erase::<2>(&[0, 1, 2], 2).unwrap(), [0, 1]);
        assert!(seq_erase::<2>(&[0, 1, 2], 3).is_err());
        assert_eq!(seq_index("at", 3, -1).unwrap(), 2);
        assert!(seq_index("at", 0, 0).is_err());
        assert!(seq_index("at", 3, i64::MIN).is_err());
    }
}
