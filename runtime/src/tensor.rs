//! Tensors going into and coming out of a model.
//!
//! Outputs are [`Tensor`]s: a borrowed slice of their element type (`f32` unless the network
//! says otherwise) plus the shape the compiler inferred, so reading a result never copies.
//! Inputs are anything implementing [`AsInput`]: slices, arrays and vectors of the element type,
//! tensors, and byte buffers holding such values (for example a memory-mapped file; [`AsInput`]
//! says how they are read). The generated code checks the length with [`input`] against the
//! declared type.

use core::fmt;
use core::ops::Deref;

use crate::Error;

mod sealed {
    pub trait Sealed {}
}

/// The element types a model's inputs and outputs can have: `f32`, `f64`, `i64`, `i32` and `u8`
/// (which also holds `bool` tensors, as 0 or 1).
pub trait Scalar: bytemuck::Pod + fmt::Debug + PartialEq + sealed::Sealed {
    /// The DSL's name of the type (`f32`, ...).
    const NAME: &'static str;
}

macro_rules! scalars {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Scalar for $t {
            const NAME: &'static str = stringify!($t);
        }
    )*};
}
scalars!(f32, f64, i64, i32, u8);

/// A tensor borrowed from a model's arena (or any slice), with its shape.
///
/// Dereferences to `[T]`, so all slice methods work; the elements are in row-major order.
#[derive(Clone, Copy, PartialEq)]
pub struct Tensor<'a, T: Scalar = f32> {
    data: &'a [T],
    shape: &'a [usize],
}

impl<'a, T: Scalar> Tensor<'a, T> {
    /// Pairs `data` with its shape. The generated code guarantees `data.len()` is the product of
    /// `shape`; other callers should keep that invariant too.
    #[inline]
    pub fn new(data: &'a [T], shape: &'a [usize]) -> Self {
        debug_assert_eq!(
            shape.iter().product::<usize>(),
            data.len(),
            "Tensor::new: data length does not match the shape {shape:?}"
        );
        Tensor { data, shape }
    }

    /// The tensor's dimensions, outermost first.
    #[inline]
    pub fn shape(&self) -> &'a [usize] {
        self.shape
    }

    /// The element type's name (`"f32"`, `"i64"`, ...).
    #[inline]
    pub fn dtype(&self) -> &'static str {
        T::NAME
    }

    /// The elements in row-major order, with the arena's lifetime (not the `Tensor`'s).
    #[inline]
    pub fn as_slice(&self) -> &'a [T] {
        self.data
    }

    /// The elements as bytes, in native byte order.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        bytemuck::cast_slice(self.data)
    }

    /// Copies the elements into a new vector, for keeping a result past the next model call.
    pub fn to_vec(&self) -> Vec<T> {
        self.data.to_vec()
    }

    /// The number of elements.
    #[inline]
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether the tensor has no elements (some dimension is zero).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

impl Tensor<'_, f32> {
    /// The flat index of the largest element, the first one on ties; `None` if the tensor is
    /// empty or holds only NaNs. NaNs are skipped, so one bad logit does not hide the answer.
    pub fn argmax(&self) -> Option<usize> {
        let mut best: Option<(usize, f32)> = None;
        for (i, &v) in self.data.iter().enumerate() {
            if v.is_nan() {
                continue;
            }
            match best {
                Some((_, b)) if v <= b => {}
                _ => best = Some((i, v)),
            }
        }
        best.map(|(i, _)| i)
    }
}

impl<T: Scalar> Deref for Tensor<'_, T> {
    type Target = [T];

    #[inline]
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T: Scalar> fmt::Debug for Tensor<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &T::NAME)
            .field("shape", &self.shape)
            .field("data", &self.data)
            .finish()
    }
}

/// Model inputs: anything that can be viewed as values of type `T` (`f32` by default) without
/// copying.
///
/// Implemented for `[T]`, `[T; N]`, `Vec<T>`, [`Tensor<T>`](Tensor) (to feed one model's output
/// to another; it also carries a shape), byte buffers `[u8]`/`Vec<u8>`, and references to any of
/// these.
///
/// Byte buffers are viewed as values in place (with bytemuck), never decoded: they must start at
/// an address aligned for `T`, and their values are read in the machine's **native** byte order.
/// That is little-endian on x86_64, aarch64 and armv7 Linux; on a big-endian machine, bytes
/// written by a little-endian one must be converted first (e.g. with `f32::from_le_bytes` into a
/// `Vec<f32>`). Weights files are different: their loaders decode safetensors' little-endian
/// values on every machine.
pub trait AsInput<T: Scalar = f32> {
    /// The values, or an error saying why the bytes cannot be read as `T`s in place.
    fn values(&self) -> Result<&[T], Error>;

    /// The input's shape, when it carries one (a [`Tensor`]). A model compiled for several
    /// shapes picks its variant by it; without one, by the number of values.
    #[inline]
    fn shape(&self) -> Option<&[usize]> {
        None
    }
}

impl<T: Scalar> AsInput<T> for [T] {
    #[inline]
    fn values(&self) -> Result<&[T], Error> {
        Ok(self)
    }
}

impl<T: Scalar, const N: usize> AsInput<T> for [T; N] {
    #[inline]
    fn values(&self) -> Result<&[T], Error> {
        Ok(self)
    }
}

impl<T: Scalar> AsInput<T> for Vec<T> {
    #[inline]
    fn values(&self) -> Result<&[T], Error> {
        Ok(self)
    }
}

impl<T: Scalar> AsInput<T> for Tensor<'_, T> {
    #[inline]
    fn values(&self) -> Result<&[T], Error> {
        Ok(self.data)
    }
    #[inline]
    fn shape(&self) -> Option<&[usize]> {
        Some(self.shape)
    }
}

/// Bytes viewed as `T`s in place, with an error that says which of the two reasons it failed.
fn from_bytes<T: Scalar>(bytes: &[u8]) -> Result<&[T], Error> {
    // Check the two failure causes ourselves so the error says which one it was; bytemuck's own
    // error does not tell a user what to do.
    let size = core::mem::size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::InputNotWhole {
            name: None,
            bytes: bytes.len(),
            dtype: T::NAME,
            size,
        });
    }
    let align = core::mem::align_of::<T>();
    let offset = bytes.as_ptr().addr() % align;
    bytemuck::try_cast_slice(bytes).map_err(|_| Error::InputMisaligned {
        name: None,
        offset,
        align,
    })
}

// `[u8]` as `u8`s is the generic impl above; as wider types, a view of the bytes.
macro_rules! bytes_as {
    ($($t:ty),*) => {$(
        impl AsInput<$t> for [u8] {
            #[inline]
            fn values(&self) -> Result<&[$t], Error> {
                from_bytes(self)
            }
        }
        impl AsInput<$t> for Vec<u8> {
            #[inline]
            fn values(&self) -> Result<&[$t], Error> {
                from_bytes(self)
            }
        }
    )*};
}
bytes_as!(f32, f64, i64, i32);

impl<T: Scalar, X: AsInput<T> + ?Sized> AsInput<T> for &X {
    #[inline]
    fn values(&self) -> Result<&[T], Error> {
        (**self).values()
    }
    #[inline]
    fn shape(&self) -> Option<&[usize]> {
        (**self).shape()
    }
}

/// One input as `select_variant` sees it: its name, its shape if it carries one, and its length.
pub type InputInfo<'a> = (&'static str, Option<&'a [usize]>, usize);

/// The variant of a model compiled for several shapes whose input shapes the inputs have:
/// `variants[k][i]` is input `i`'s shape in variant `k`. An input with a shape must match it
/// exactly; one without is matched by its number of values. Allocates only on error.
pub fn select_variant(
    inputs: &[InputInfo<'_>],
    variants: &'static [&'static [&'static [usize]]],
) -> Result<usize, Error> {
    let fits = |k: usize, i: usize| -> bool {
        let want = variants[k][i];
        match inputs[i].1 {
            Some(shape) => shape == want,
            None => inputs[i].2 == want.iter().product::<usize>(),
        }
    };
    let mut found = None;
    let mut ambiguous = false;
    for k in 0..variants.len() {
        if (0..inputs.len()).all(|i| fits(k, i)) {
            if found.is_some() {
                ambiguous = true;
            } else {
                found = Some(k);
            }
        }
    }
    match found {
        Some(_) if ambiguous => Err(Error::AmbiguousShape {
            candidates: (0..variants.len())
                .filter(|&k| (0..inputs.len()).all(|i| fits(k, i)))
                .map(|k| variants[k])
                .collect(),
        }),
        Some(k) => Ok(k),
        None => {
            // Name the first input that no variant accepts, given the inputs before it.
            let mut alive: Vec<usize> = (0..variants.len()).collect();
            for (i, &(name, shape, len)) in inputs.iter().enumerate() {
                let next: Vec<usize> = alive.iter().copied().filter(|&k| fits(k, i)).collect();
                if next.is_empty() {
                    let mut listed: Vec<&'static [usize]> = Vec::new();
                    for &k in &alive {
                        if !listed.contains(&variants[k][i]) {
                            listed.push(variants[k][i]);
                        }
                    }
                    return Err(Error::UnknownShape {
                        name,
                        got: shape.map_or_else(|| vec![len], <[usize]>::to_vec),
                        with_shape: shape.is_some(),
                        listed,
                    });
                }
                alive = next;
            }
            unreachable!("some input rules out every variant")
        }
    }
}

/// Views input `name` as exactly `len` values, or says what was wrong. `ty` is the declared type
/// as written in the DSL and only appears in the error message.
#[inline]
pub fn input<'a, T: Scalar, X: AsInput<T> + ?Sized>(
    name: &'static str,
    ty: &'static str,
    x: &'a X,
    len: usize,
) -> Result<&'a [T], Error> {
    let values = x.values().map_err(|e| match e {
        // `values` cannot know the input's name; add it here where it is known.
        Error::InputNotWhole {
            name: None,
            bytes,
            dtype,
            size,
        } => Error::InputNotWhole {
            name: Some(name),
            bytes,
            dtype,
            size,
        },
        Error::InputMisaligned {
            name: None,
            offset,
            align,
        } => Error::InputMisaligned {
            name: Some(name),
            offset,
            align,
        },
        other => other,
    })?;
    if values.len() != len {
        return Err(Error::InputLength {
            name,
            ty,
            dtype: T::NAME,
            expected: len,
            got: values.len(),
        });
    }
    Ok(values)
}

/// The run-time error of an index kernel (`gather`) as a model [`Error`].
#[cold]
pub fn index_error(op: &'static str, e: kiln_kernels::GatherError) -> Error {
    Error::IndexOutOfRange {
        op,
        position: e.position,
        index: e.index,
        len: e.len,
    }
}

/// `len` values of type `T` at the start of an arena region (the planner gives every region a
/// 64-byte aligned offset in the 64-byte aligned arena, so any `T` is aligned).
///
/// # Panics
///
/// On a region that is misaligned or too short for `len` values, which the plan verifier rules
/// out ("internal error").
#[inline]
pub fn view<T: Scalar>(region: &[f32], len: usize) -> &[T] {
    match bytemuck::try_cast_slice::<u8, T>(bytemuck::cast_slice(region)) {
        Ok(v) if v.len() >= len => &v[..len],
        _ => panic!(
            "kiln internal error: an arena region does not hold {len} {}",
            T::NAME
        ),
    }
}

/// [`view`] for writing.
#[inline]
pub fn view_mut<T: Scalar>(region: &mut [f32], len: usize) -> &mut [T] {
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(region);
    match bytemuck::try_cast_slice_mut::<u8, T>(bytes) {
        Ok(v) if v.len() >= len => &mut v[..len],
        _ => panic!(
            "kiln internal error: an arena region does not hold {len} {}",
            T::NAME
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TY: &str = "fm<1xf32[2,2]>";

    #[test]
    fn tensor_accessors() {
        let data = [0.5f32, -1.0, 3.0, 3.0, 2.0, 0.0];
        let t = Tensor::new(&data, &[2, 3]);
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.len(), 6);
        assert!(!t.is_empty());
        assert_eq!(t.to_vec(), vec![0.5, -1.0, 3.0, 3.0, 2.0, 0.0]);
        assert_eq!(t[4], 2.0);
        // Ties go to the first maximum.
        assert_eq!(t.argmax(), Some(2));
        assert!(format!("{t:?}").contains("shape: [2, 3]"));
    }

    #[test]
    fn argmax_edge_cases() {
        assert_eq!(Tensor::new(&[], &[0]).argmax(), None);
        assert_eq!(Tensor::new(&[f32::NAN, f32::NAN], &[2]).argmax(), None);
        assert_eq!(
            Tensor::new(&[f32::NAN, -5.0, f32::NAN, -4.0], &[4]).argmax(),
            Some(3)
        );
        assert_eq!(
            Tensor::new(&[f32::NEG_INFINITY, f32::NEG_INFINITY], &[2]).argmax(),
            Some(0)
        );
    }

    #[test]
    fn input_accepts_f32_containers() {
        let arr = [1.0f32, 2.0, 3.0, 4.0];
        let v = arr.to_vec();
        assert_eq!(input("x", TY, &arr, 4).unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(input("x", TY, &v, 4).unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(input("x", TY, &arr[..], 4).unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        // A reference to a reference goes through the blanket impl.
        let r: &[f32] = &arr;
        assert_eq!(input("x", TY, &r, 4).unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        let t = Tensor::new(&arr, &[2, 2]);
        assert_eq!(input("x", TY, &t, 4).unwrap(), &[1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn input_wrong_length() {
        let short = [0.0f32; 3];
        let err = input("x", TY, &short, 4).unwrap_err();
        assert_eq!(
            err.to_string(),
            "input `x`: expected 4 f32 values (fm<1xf32[2,2]>), got 3"
        );
        let long = vec![0.0f32; 5];
        let err = input("img", TY, &long, 4).unwrap_err();
        assert_eq!(
            err,
            Error::InputLength {
                name: "img",
                ty: TY,
                dtype: "f32",
                expected: 4,
                got: 5
            }
        );
    }

    #[test]
    fn input_from_bytes() {
        // A Vec<f32>'s buffer is 4-byte aligned, so viewing it as bytes gives an aligned [u8].
        let values = [1.5f32, -2.0, 0.25, 8.0];
        let mut backing = vec![0f32; 5];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut backing);
        for (chunk, v) in bytes.chunks_exact_mut(4).zip(values) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        let aligned = &bytes[..16];
        assert_eq!(input::<f32, _>("x", TY, aligned, 4).unwrap(), &values);
        let owned: Vec<u8> = aligned.to_vec();
        // A Vec<u8> may or may not be 4-byte aligned; only check the success case when it is.
        if owned.as_ptr().addr().is_multiple_of(4) {
            assert_eq!(input::<f32, _>("x", TY, &owned, 4).unwrap(), &values);
        }

        // 15 bytes: not a whole number of f32s, whatever the alignment.
        let err = input::<f32, _>("x", TY, &bytes[..15], 4).unwrap_err();
        assert_eq!(
            err.to_string(),
            "input `x`: 15 bytes is not a whole number of f32 values (4 bytes each)"
        );
        // 20 bytes: five values where four are expected.
        let err = input::<f32, _>("x", TY, &bytes[..20], 4).unwrap_err();
        assert_eq!(
            err,
            Error::InputLength {
                name: "x",
                ty: TY,
                dtype: "f32",
                expected: 4,
                got: 5
            }
        );
        // Starting one byte in: misaligned.
        let err = input::<f32, _>("x", TY, &bytes[1..17], 4).unwrap_err();
        assert_eq!(
            err,
            Error::InputMisaligned {
                name: Some("x"),
                offset: 1,
                align: 4
            }
        );
        assert!(err
            .to_string()
            .starts_with("input `x`: bytes start 1 byte(s) past"));
        // Without going through `input`, the error has no name.
        assert_eq!(
            AsInput::<f32>::values(&bytes[2..6]),
            Err(Error::InputMisaligned {
                name: None,
                offset: 2,
                align: 4
            })
        );
        // Other element types read bytes the same way.
        let ints = [7i64, -1];
        let raw: &[u8] = bytemuck::cast_slice(&ints);
        assert_eq!(
            input::<i64, _>("i", "tensor<i64[2]>", raw, 2).unwrap(),
            &ints
        );
        let err = input::<i64, _>("i", "tensor<i64[2]>", &raw[..12], 2).unwrap_err();
        assert_eq!(
            err.to_string(),
            "input `i`: 12 bytes is not a whole number of i64 values (8 bytes each)"
        );
    }
}

#[cfg(test)]
mod variant_tests {
    use super::*;

    static VARIANTS: &[&[&[usize]]] = &[&[&[1, 3, 8, 8]], &[&[1, 3, 12, 12]], &[&[1, 3, 4, 16]]];

    #[test]
    fn picks_by_shape_or_by_length() {
        assert_eq!(
            select_variant(&[("x", Some(&[1, 3, 12, 12]), 432)], VARIANTS),
            Ok(1)
        );
        assert_eq!(select_variant(&[("x", None, 192)], VARIANTS).ok(), None);
        assert_eq!(select_variant(&[("x", None, 432)], VARIANTS), Ok(1));
    }

    #[test]
    fn unknown_shapes_list_the_compiled_ones() {
        let e = select_variant(&[("x", Some(&[1, 3, 9, 9]), 243)], VARIANTS).unwrap_err();
        assert_eq!(
            e.to_string(),
            "input `x` has shape [1, 3, 9, 9], but the model was compiled for the shapes \
             [1, 3, 8, 8], [1, 3, 12, 12], [1, 3, 4, 16]"
        );
    }

    #[test]
    fn equal_lengths_are_ambiguous_without_a_shape() {
        // [1,3,8,8] and [1,3,4,16] both hold 192 values.
        let e = select_variant(&[("x", None, 192)], VARIANTS).unwrap_err();
        assert!(matches!(e, Error::AmbiguousShape { .. }), "{e}");
        assert_eq!(
            select_variant(&[("x", Some(&[1, 3, 4, 16]), 192)], VARIANTS),
            Ok(2)
        );
    }
}
