//! Loading a model's parameters from safetensors bytes into its `f32` parameter buffer.
//!
//! The compiler lays every parameter tensor out at a fixed offset in one buffer and describes each
//! with a [`TensorSpec`]. Two loaders fill that buffer:
//!
//! - [`load_embedded`] for a file embedded with `include_bytes!`, whose header the compiler has
//!   already parsed and checked, so it only copies (and cannot fail);
//! - [`load_safetensors`] for bytes given at run time, which it validates with the `safetensors`
//!   crate first and rejects with an [`Error`] naming the offending tensor.
//!
//! Both decode little-endian `f32`s one value at a time, so the file data need not be aligned and
//! big-endian hosts read the same numbers.
//!
//! A model whose weights the compiler could prepare at build time needs neither: it embeds the
//! prepared buffer itself (folded, in the kernels' layout, little-endian `f32`s, 64-byte
//! aligned) and [`params_in_place`] reads it where it lies in the binary, so `new()` copies
//! nothing and the pages are only touched when a run reads them. [`Params`] is the model's
//! parameter storage either way.

use safetensors::{Dtype, SafeTensorError, SafeTensors};

use kiln_kernels::pack::{self, WeightLayout};

use crate::arena::AlignedBuf;
use crate::Error;

/// A model's prepared parameters: a buffer it owns (loaded and prepared at run time) or the
/// prepared bytes embedded in the binary, borrowed for the program's lifetime.
#[derive(Debug)]
pub enum Params {
    Owned(AlignedBuf),
    Static(&'static [f32]),
}

impl Params {
    /// The prepared values.
    pub fn as_slice(&self) -> &[f32] {
        match self {
            Params::Owned(b) => b.as_slice(),
            Params::Static(s) => s,
        }
    }
}

/// A weight matrix the compiler laid out for the kernels: `groups` matrices of `m x k` at `f32`
/// offset `start` of the parameter buffer (see `kiln_kernels::pack`).
pub type Packed = (usize, usize, usize, usize);

/// The layout the compiler writes packed weights in, in embedded buffers: the x86 SIMD tables'
/// (the others get a copy converted from it in `new()`).
pub const EMBEDDED_LAYOUT: WeightLayout = WeightLayout::DepthBlocked;

/// The parameters of a model whose prepared buffer the compiler embedded: `bytes` are its
/// little-endian `f32`s, with the matrices `packed` in [`EMBEDDED_LAYOUT`]. If the table's
/// `layout` is that one (or nothing is packed), on a little-endian target with the bytes
/// 4-aligned (generated code wraps them in [`crate::__private::Aligned`]), they are read in
/// place; otherwise (another ISA's table, a big-endian target) they are decoded once into an
/// owned buffer and the packed matrices converted to `layout`.
pub fn params_in_place(bytes: &'static [u8], layout: WeightLayout, packed: &[Packed]) -> Params {
    let same_layout = layout == EMBEDDED_LAYOUT || packed.is_empty();
    if cfg!(target_endian = "little") && same_layout {
        if let Ok(values) = bytemuck::try_cast_slice::<u8, f32>(bytes) {
            return Params::Static(values);
        }
    }
    let mut owned = AlignedBuf::zeroed(bytes.len() / 4);
    copy_le(bytes, owned.as_mut_slice());
    if !same_layout {
        let params = owned.as_mut_slice();
        for &(start, groups, m, k) in packed {
            let Some(w) = params.get_mut(start..start + groups * m * k) else {
                continue;
            };
            let embedded = w.to_vec();
            pack::unpack(EMBEDDED_LAYOUT, groups, m, k, &embedded, w);
            pack_weights(layout, groups, m, k, w);
        }
    }
    Params::Owned(owned)
}

/// Puts `groups` row-major `m x k` weight matrices (`w`) into `layout`, in place (a load-time
/// preparation step; it copies them once).
pub fn pack_weights(layout: WeightLayout, groups: usize, m: usize, k: usize, w: &mut [f32]) {
    if layout != WeightLayout::Rows {
        let rows = w.to_vec();
        pack::pack(layout, groups, m, k, &rows, w);
    }
}

/// Where one parameter tensor comes from in the weights file and goes in the parameter buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorSpec {
    /// The tensor's name in the safetensors file.
    pub name: &'static str,
    /// The shape the model expects.
    pub shape: &'static [usize],
    /// Offset, in `f32`s, of the tensor's first value in the parameter buffer.
    pub dst: usize,
    /// Absolute byte offset of the tensor's data in the embedded file
    /// (`8 + header_len + data_offsets.0`). Only [`load_embedded`] uses it.
    pub src: usize,
}

impl TensorSpec {
    /// The number of values, or `None` if the shape's product overflows.
    fn len(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))
    }
}

/// Decodes little-endian `f32`s from `src` into `dst` (as many as fit in both).
fn copy_le(src: &[u8], dst: &mut [f32]) {
    for (chunk, out) in src.chunks_exact(4).zip(dst.iter_mut()) {
        *out = f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
}

/// The destination of `spec` in `params`, if it lies inside.
fn dst_range(spec: &TensorSpec, params_len: usize) -> Option<core::ops::Range<usize>> {
    let end = spec.dst.checked_add(spec.len()?)?;
    (end <= params_len).then_some(spec.dst..end)
}

/// Copies every spec's tensor out of an embedded safetensors `file` into `params`.
///
/// The compiler has already checked the file's header against the specs and asserts the file
/// length in a constant, so this only copies: `product(shape)` little-endian `f32`s from byte
/// `src` to `params[dst..]`. It never panics; a spec that were out of bounds (impossible for
/// generated code) would be skipped.
pub fn load_embedded(file: &[u8], specs: &[TensorSpec], params: &mut [f32]) {
    for spec in specs {
        let Some(n) = spec.len() else { continue };
        let Some(src_end) = n.checked_mul(4).and_then(|b| b.checked_add(spec.src)) else {
            continue;
        };
        let Some(range) = dst_range(spec, params.len()) else {
            continue;
        };
        if let (Some(src), Some(dst)) = (file.get(spec.src..src_end), params.get_mut(range)) {
            copy_le(src, dst);
        }
    }
}

/// Loads every spec's tensor from safetensors `bytes` given at run time into `params`.
///
/// Each tensor must be present with dtype `F32` and exactly the spec's shape; tensors the model
/// does not use are ignored. Everything is checked before anything is copied, so on error
/// `params` is unchanged.
///
/// # Panics
///
/// With an "internal error" message if a spec's destination lies outside `params`; generated
/// code sizes `params` from the same specs, so this is a kiln bug, not bad input.
pub fn load_safetensors(
    bytes: &[u8],
    specs: &[TensorSpec],
    params: &mut [f32],
) -> Result<(), Error> {
    let file = SafeTensors::deserialize(bytes).map_err(|e| Error::WeightsFile {
        reason: e.to_string(),
    })?;

    // Check every tensor first, keeping the data views for the copy below. A `Vec` is fine here:
    // loading weights happens once, outside the allocation-free run path.
    let mut sources = Vec::with_capacity(specs.len());
    for spec in specs {
        let view = match file.tensor(spec.name) {
            Ok(view) => view,
            Err(SafeTensorError::TensorNotFound(_)) => {
                return Err(Error::WeightMissing {
                    tensor: spec.name,
                    shape: spec.shape,
                })
            }
            Err(e) => {
                return Err(Error::WeightsFile {
                    reason: e.to_string(),
                })
            }
        };
        if view.dtype() != Dtype::F32 {
            return Err(Error::WeightDtype {
                tensor: spec.name,
                dtype: view.dtype().to_string(),
            });
        }
        if view.shape() != spec.shape {
            return Err(Error::WeightShape {
                tensor: spec.name,
                file: view.shape().to_vec(),
                expected: spec.shape,
            });
        }
        sources.push(view.data());
    }

    for (spec, src) in specs.iter().zip(sources) {
        let Some(range) = dst_range(spec, params.len()) else {
            panic!(
                "internal error: parameter `{}` (offset {}, shape {:?}) lies outside the \
                 parameter buffer of {} f32s; this is a kiln bug, please report it",
                spec.name,
                spec.dst,
                spec.shape,
                params.len()
            );
        };
        // The crate validated that the data is exactly `4 * product(shape)` bytes.
        copy_le(src, &mut params[range]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::tensor::TensorView;

    fn le_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    /// A file with `fc.weight` f32 [2, 3], `fc.bias` f32 [2], an unused `extra` f32 [1] and a
    /// half-precision `half` [2].
    fn sample_file() -> Vec<u8> {
        let w = le_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = le_bytes(&[-0.5, 0.25]);
        let x = le_bytes(&[9.0]);
        let h = vec![0u8; 4];
        let tensors = vec![
            (
                "fc.weight",
                TensorView::new(Dtype::F32, vec![2, 3], &w).unwrap(),
            ),
            ("fc.bias", TensorView::new(Dtype::F32, vec![2], &b).unwrap()),
            ("extra", TensorView::new(Dtype::F32, vec![1], &x).unwrap()),
            ("half", TensorView::new(Dtype::F16, vec![2], &h).unwrap()),
        ];
        safetensors::serialize(tensors, None).unwrap()
    }

    const WEIGHT: TensorSpec = TensorSpec {
        name: "fc.weight",
        shape: &[2, 3],
        dst: 0,
        src: 0,
    };
    // Deliberately not right after the weight, to see that `dst` is honoured.
    const BIAS: TensorSpec = TensorSpec {
        name: "fc.bias",
        shape: &[2],
        dst: 8,
        src: 0,
    };

    const EXPECTED: [f32; 11] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 7.0, -0.5, 0.25, 7.0];

    #[test]
    fn load_present_tensors() {
        let file = sample_file();
        let mut params = [7.0f32; 11];
        load_safetensors(&file, &[BIAS, WEIGHT], &mut params).unwrap();
        assert_eq!(params, EXPECTED);
    }

    #[test]
    fn load_missing_tensor() {
        let file = sample_file();
        let mut params = [7.0f32; 11];
        let spec = TensorSpec {
            name: "conv.bias",
            shape: &[10],
            ..BIAS
        };
        let err = load_safetensors(&file, &[WEIGHT, spec], &mut params).unwrap_err();
        assert_eq!(
            err.to_string(),
            "weights: tensor `conv.bias` (f32 [10]) is missing from the file"
        );
        // Nothing was copied, not even the valid tensor before the missing one.
        assert_eq!(params, [7.0; 11]);
    }

    #[test]
    fn load_wrong_shape() {
        let file = sample_file();
        let mut params = [0.0f32; 11];
        let spec = TensorSpec {
            shape: &[3, 2],
            ..WEIGHT
        };
        let err = load_safetensors(&file, &[spec], &mut params).unwrap_err();
        assert_eq!(
            err.to_string(),
            "weights: tensor `fc.weight` has shape [2, 3] in the file, the model expects [3, 2]"
        );
    }

    #[test]
    fn load_wrong_dtype() {
        let file = sample_file();
        let mut params = [0.0f32; 11];
        let spec = TensorSpec {
            name: "half",
            shape: &[2],
            dst: 0,
            src: 0,
        };
        let err = load_safetensors(&file, &[spec], &mut params).unwrap_err();
        assert_eq!(
            err.to_string(),
            "weights: tensor `half` has dtype F16 in the file, the model expects F32"
        );
    }

    #[test]
    fn load_truncated_and_garbage() {
        let file = sample_file();
        let mut params = [0.0f32; 11];
        let prefix = "weights: not a valid safetensors file: ";
        for bad in [
            &file[..file.len() - 1],
            &file[..file.len() / 2],
            &file[..4],
            &[][..],
            b"hello, world! this is not a safetensors file",
            &[0xff; 64][..],
        ] {
            let err = load_safetensors(bad, &[WEIGHT], &mut params).unwrap_err();
            assert!(matches!(err, Error::WeightsFile { .. }), "{err:?}");
            let msg = err.to_string();
            assert!(msg.starts_with(prefix) && msg.len() > prefix.len(), "{msg}");
        }
        assert_eq!(params, [0.0; 11]);
    }

    /// Finds a tensor's absolute data offset with the safetensors crate, independently of the
    /// compiler's header reader.
    fn abs_offset(file: &[u8], name: &str) -> usize {
        let (n, meta) = SafeTensors::read_metadata(file).unwrap();
        8 + n + meta.info(name).unwrap().data_offsets.0
    }

    #[test]
    fn load_embedded_round_trip() {
        let file = sample_file();
        let specs = [
            TensorSpec {
                src: abs_offset(&file, "fc.weight"),
                ..WEIGHT
            },
            TensorSpec {
                src: abs_offset(&file, "fc.bias"),
                ..BIAS
            },
        ];
        let mut params = [7.0f32; 11];
        load_embedded(&file, &specs, &mut params);
        assert_eq!(params, EXPECTED);

        // Misaligned file data decodes the same (values are read byte-wise).
        let mut shifted = vec![0u8; 3];
        shifted.extend_from_slice(&file);
        let specs = specs.map(|s| TensorSpec {
            src: s.src + 3,
            ..s
        });
        let mut params = [7.0f32; 11];
        load_embedded(&shifted, &specs, &mut params);
        assert_eq!(params, EXPECTED);
    }

    #[test]
    fn prepared_bytes_are_read_in_place_when_aligned() {
        static BYTES: crate::__private::Aligned<[u8; 12]> = crate::__private::Aligned([
            0, 0, 128, 63, // 1.0
            0, 0, 0, 192, // -2.0
            0, 0, 64, 64, // 3.0
        ]);
        let p = params_in_place(&BYTES.0, WeightLayout::Rows, &[]);
        assert_eq!(p.as_slice(), [1.0, -2.0, 3.0]);
        if cfg!(target_endian = "little") {
            assert!(matches!(p, Params::Static(s) if s.as_ptr().cast() == BYTES.0.as_ptr()));
        }
        // Misaligned bytes (not what generated code passes) are decoded into a copy.
        let p = params_in_place(&BYTES.0[1..9], EMBEDDED_LAYOUT, &[]);
        assert!(matches!(p, Params::Owned(_)));
        assert_eq!(p.as_slice().len(), 2);
    }

    /// Packed matrices are read in place by a table with the embedded layout and converted for
    /// one without it (a portable or NEON table), to exactly what that table would get from
    /// `pack_weights` at load time.
    #[test]
    fn packed_weights_follow_the_table() {
        let (groups, m, k) = (1, 2, pack::KC + 10);
        let rows: Vec<f32> = (0..m * k).map(|i| i as f32).collect();
        let mut blocked = rows.clone();
        pack_weights(EMBEDDED_LAYOUT, groups, m, k, &mut blocked);
        assert_ne!(blocked, rows);
        // One float before the matrix, as at a parameter offset.
        let bytes: Vec<u8> = core::iter::once(-1.0f32)
            .chain(blocked.iter().copied())
            .flat_map(f32::to_le_bytes)
            .collect();
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        let packed = [(1, groups, m, k)];
        assert_eq!(
            params_in_place(bytes, EMBEDDED_LAYOUT, &packed).as_slice()[1..],
            blocked[..]
        );
        let p = params_in_place(bytes, WeightLayout::Rows, &packed);
        assert!(matches!(p, Params::Owned(_)));
        assert_eq!(p.as_slice()[0], -1.0);
        assert_eq!(p.as_slice()[1..], rows[..]);
    }

    #[test]
    fn load_embedded_skips_out_of_bounds_specs() {
        let file = sample_file();
        let mut params = [7.0f32; 4];
        let specs = [
            TensorSpec {
                src: file.len() - 4,
                ..WEIGHT
            },
            TensorSpec {
                src: abs_offset(&file, "fc.bias"),
                dst: 3,
                ..BIAS
            },
            TensorSpec {
                shape: &[usize::MAX, 2],
                ..WEIGHT
            },
        ];
        load_embedded(&file, &specs, &mut params);
        assert_eq!(params, [7.0; 4]);
    }
}
