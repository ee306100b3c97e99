//! Reading and validating the header of a safetensors file at compile time, without reading its
//! data: the compiler checks a network's parameters against the header only.
//!
//! The format: an 8-byte little-endian `u64` `n`, then `n` bytes of UTF-8 JSON, then the data
//! section. The JSON is an object mapping each tensor name to
//! `{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}` (offsets relative to the data
//! section), plus an optional `"__metadata__"` object of strings, which is ignored.
//!
//! Sketch:
//!
//! 1. [`read_header`] reads the 8-byte `n` and refuses it when it is over the `safetensors`
//!    crate's 100 MB limit or runs past the end of the file (whose length the caller takes from
//!    the file's metadata), then reads exactly `n` more bytes. The data section is never read, so
//!    a multi-gigabyte weights file costs one small read per macro expansion.
//! 2. The JSON is parsed with `serde_json` (whose recursion limit keeps hostile nesting from
//!    exhausting the stack) into the header's entries in file order, so a tensor named twice is
//!    reported rather than silently replaced. Dtypes are the `safetensors` crate's own [`Dtype`],
//!    so the set of dtypes and their sizes are exactly those the run-time loader knows.
//! 3. Each tensor is validated with `u64` arithmetic, whatever the host's pointer width:
//!    `begin <= end <= data length` and `end - begin == product(shape) * bits(dtype) / 8`.
//! 4. The layout is validated as the `safetensors` crate does at run time: tensors are stored back
//!    to back from offset 0 and cover the data section exactly. A file the compiler accepts must
//!    also load with `load_safetensors`, so the two readers agree.
//! 5. The numbers are converted to `usize` at the end, with an error naming the value when one
//!    does not fit (a file over 4 GiB, or a huge dimension of an empty tensor, on a 32-bit host).
//!
//! Every step returns an error saying what is wrong, naming the tensor when there is one; no input
//! can make it panic (checked arithmetic throughout, no fallible indexing).

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read};

use ::safetensors::Dtype;
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::Value;

/// The parsed and validated header of a safetensors file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Byte offset of the data section in the file: `8 + header length`.
    pub data_start: usize,
    /// The length of the whole file in bytes.
    pub file_len: usize,
    /// Every tensor in the file, by name.
    pub tensors: BTreeMap<String, TensorInfo>,
}

/// One tensor's entry in the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorInfo {
    /// The element type.
    pub dtype: Dtype,
    /// The dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Start of the tensor's bytes, relative to [`Header::data_start`].
    pub begin: usize,
    /// End (exclusive) of the tensor's bytes, relative to [`Header::data_start`].
    pub end: usize,
}

/// Why a header could not be read.
#[derive(Debug)]
pub enum HeaderError {
    /// Reading the file failed.
    Io(io::Error),
    /// The file starts with a zip archive's signature: most likely a PyTorch checkpoint.
    Zip,
    /// The file is not a valid safetensors file; the message says why.
    Invalid(String),
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::Io(e) => write!(f, "{e}"),
            HeaderError::Zip => f.write_str("the file is a zip archive"),
            HeaderError::Invalid(reason) => f.write_str(reason),
        }
    }
}

/// The largest header the `safetensors` crate accepts; larger ones are rejected here too.
const MAX_HEADER_LEN: u64 = 100_000_000;

/// Reads and validates the header of the safetensors file that `file` reads from its start.
///
/// `file_len` is the length of the whole file (from its metadata); only the 8-byte length and
/// the JSON header are read, at most `min(file_len, 8 + 100 MB)` bytes.
pub fn read_header(file: &mut impl Read, file_len: u64) -> Result<Header, HeaderError> {
    let invalid = |reason: String| Err(HeaderError::Invalid(reason));
    if file_len < 8 {
        return invalid(format!(
            "the file is {file_len} bytes long, too short for the 8-byte header length"
        ));
    }
    let mut len_bytes = [0; 8];
    read_exact(file, &mut len_bytes)?;
    if len_bytes.starts_with(b"PK\x03\x04") {
        return Err(HeaderError::Zip);
    }
    let header_len = u64::from_le_bytes(len_bytes);
    if header_len > MAX_HEADER_LEN {
        return invalid(format!(
            "the header length {header_len} is larger than the {MAX_HEADER_LEN}-byte limit"
        ));
    }
    // At most 100 MB + 8: no overflow, and the header length fits in a 32-bit `usize`.
    let data_start = 8 + header_len;
    if data_start > file_len {
        return invalid(format!(
            "the header length {header_len} runs past the end of the {file_len}-byte file"
        ));
    }
    let Ok(len) = usize::try_from(header_len) else {
        return invalid(format!(
            "the header length {header_len} does not fit in memory"
        ));
    };
    let mut json = vec![0; len];
    read_exact(file, &mut json)?;
    parse(&json, file_len).map_err(HeaderError::Invalid)
}

/// `read_exact`, with a file that ends early (it shrank after its length was taken) reported as
/// an invalid file rather than an I/O error.
fn read_exact(file: &mut impl Read, buf: &mut [u8]) -> Result<(), HeaderError> {
    file.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => HeaderError::Invalid(
            "the file ends inside its header (was it changed while being read?)".to_string(),
        ),
        _ => HeaderError::Io(e),
    })
}

/// One tensor's entry as read, in `u64`s (the file's own integer width).
struct Entry {
    dtype: Dtype,
    shape: Vec<u64>,
    begin: u64,
    end: u64,
}

/// Parses and validates the JSON header of a file of `file_len` bytes.
fn parse(json: &[u8], file_len: u64) -> Result<Header, String> {
    let text =
        std::str::from_utf8(json).map_err(|e| format!("the header is not valid UTF-8 ({e})"))?;
    let Entries(entries) =
        serde_json::from_str(text).map_err(|e| format!("invalid header JSON: {e}"))?;
    let mut tensors = BTreeMap::new();
    let mut saw_metadata = false;
    for (name, value) in entries {
        if name == "__metadata__" {
            if std::mem::replace(&mut saw_metadata, true) {
                return Err("`__metadata__` appears twice".to_string());
            }
            check_metadata(&value)?;
        } else {
            let entry = entry(&name, &value)?;
            if tensors.insert(name.clone(), entry).is_some() {
                return Err(format!("tensor `{name}` appears twice"));
            }
        }
    }
    // `read_header` checked that the header lies inside the file.
    let data_start = 8 + json.len() as u64;
    let data_len = file_len
        .checked_sub(data_start)
        .ok_or_else(|| format!("the header runs past the end of the {file_len}-byte file"))?;
    validate(&tensors, data_len)?;

    let file_len = usize::try_from(file_len).map_err(|_| {
        format!(
            "the file is {file_len} bytes long, more than a {}-bit host can address",
            usize::BITS
        )
    })?;
    // Every offset below is at most `file_len`, which fits.
    let fit = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let tensors = tensors
        .into_iter()
        .map(|(name, e)| {
            let shape = e
                .shape
                .iter()
                .map(|&d| {
                    usize::try_from(d).map_err(|_| {
                        format!(
                            "tensor `{name}`: dimension {d} of shape {:?} does not fit in a \
                             {}-bit usize",
                            e.shape,
                            usize::BITS
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
            let info = TensorInfo {
                dtype: e.dtype,
                shape,
                begin: fit(e.begin),
                end: fit(e.end),
            };
            Ok((name, info))
        })
        .collect::<Result<_, String>>()?;
    Ok(Header {
        data_start: fit(data_start),
        file_len,
        tensors,
    })
}

/// `"__metadata__"`: an object whose values are all strings. The contents are not needed.
fn check_metadata(value: &Value) -> Result<(), String> {
    let ok = match value {
        Value::Object(fields) => fields.values().all(Value::is_string),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`__metadata__` must be an object of strings, found {}",
            brief(value)
        ))
    }
}

/// One tensor's `{"dtype", "shape", "data_offsets"}`; other fields are ignored.
fn entry(name: &str, value: &Value) -> Result<Entry, String> {
    let Value::Object(fields) = value else {
        return Err(format!(
            "tensor `{name}`: expected an object with `dtype`, `shape` and `data_offsets`, found {}",
            brief(value)
        ));
    };
    let field = |key: &str| {
        fields
            .get(key)
            .ok_or_else(|| format!("tensor `{name}` has no `{key}`"))
    };
    let dtype = match field("dtype")? {
        // The crate's own `Dtype` decides which names are dtypes.
        v @ Value::String(s) => Dtype::deserialize(v).map_err(|_| {
            format!("tensor `{name}` has dtype `{s}`, which is not a safetensors dtype")
        })?,
        other => {
            return Err(format!(
                "tensor `{name}`: `dtype` must be a string, found {}",
                brief(other)
            ))
        }
    };
    let shape = integers(name, "shape", field("shape")?)?;
    let offsets = integers(name, "data_offsets", field("data_offsets")?)?;
    let [begin, end] = offsets[..] else {
        return Err(format!(
            "tensor `{name}`: `data_offsets` must have 2 entries, found {}",
            offsets.len()
        ));
    };
    Ok(Entry {
        dtype,
        shape,
        begin,
        end,
    })
}

/// An array of integers in `0..2^64`, or an error naming the tensor, the field and the culprit.
fn integers(name: &str, key: &str, value: &Value) -> Result<Vec<u64>, String> {
    let Value::Array(items) = value else {
        return Err(format!(
            "tensor `{name}`: `{key}` must be an array, found {}",
            brief(value)
        ));
    };
    items
        .iter()
        .map(|v| {
            v.as_u64().ok_or_else(|| {
                format!(
                    "tensor `{name}`: `{key}` must hold integers from 0 to 2^64 - 1, found {}",
                    brief(v)
                )
            })
        })
        .collect()
}

/// A JSON value for an error message: scalars as written, containers by kind only (they may be
/// long).
fn brief(value: &Value) -> String {
    match value {
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
        scalar => format!("`{scalar}`"),
    }
}

/// Checks every tensor's offsets and size, then that the tensors tile the data section.
fn validate(tensors: &BTreeMap<String, Entry>, data_len: u64) -> Result<(), String> {
    for (name, t) in tensors {
        if t.begin > t.end {
            return Err(format!(
                "tensor `{name}` has data_offsets [{}, {}], which end before they begin",
                t.begin, t.end
            ));
        }
        if t.end > data_len {
            return Err(format!(
                "tensor `{name}` has data_offsets [{}, {}], past the end of the {data_len}-byte \
                 data section",
                t.begin, t.end
            ));
        }
        let overflow = || format!("tensor `{name}`: the size of shape {:?} overflows", t.shape);
        let count = t
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .ok_or_else(overflow)?;
        let bits = u64::try_from(t.dtype.bitsize()).map_err(|_| overflow())?;
        let total_bits = count.checked_mul(bits).ok_or_else(overflow)?;
        if !total_bits.is_multiple_of(8) {
            return Err(format!(
                "tensor `{name}` ({} {:?}) does not fill a whole number of bytes",
                t.dtype, t.shape
            ));
        }
        let expected = total_bits / 8;
        let actual = t.end - t.begin;
        if actual != expected {
            return Err(format!(
                "tensor `{name}` ({} {:?}) needs {expected} bytes, but its data_offsets \
                 [{}, {}] span {actual}",
                t.dtype, t.shape, t.begin, t.end
            ));
        }
    }

    // Same rule as the `safetensors` crate: sorted by offset, the tensors sit back to back from
    // byte 0 and end exactly at the end of the file.
    let mut order: Vec<(&String, &Entry)> = tensors.iter().collect();
    order.sort_by_key(|(_, t)| (t.begin, t.end));
    let mut covered = 0;
    for (name, t) in order {
        if t.begin != covered {
            return Err(format!(
                "tensor `{name}` starts at byte {} of the data section, but the tensors before \
                 it end at byte {covered} (tensors must be stored back to back)",
                t.begin
            ));
        }
        covered = t.end;
    }
    if covered != data_len {
        return Err(format!(
            "the data section is {data_len} bytes, but the tensors cover only {covered}"
        ));
    }
    Ok(())
}

/// The header object's entries in file order, duplicates kept (a `serde_json::Map` would keep
/// only the last of two equal keys, hiding a file that names a tensor twice).
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;

        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object mapping tensor names to their entries")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }

        deserializer.deserialize_map(EntriesVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file from a header text and a data section, as a writer would lay it out.
    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    /// Reads the header of the file held in `bytes`.
    fn read(bytes: &[u8]) -> Result<Header, String> {
        read_header(&mut &bytes[..], bytes.len() as u64).map_err(|e| e.to_string())
    }

    /// Two F32 tensors and an F16 one, with metadata, padding and an unknown field, in the
    /// order and spacing a real writer might produce.
    const VALID: &str = r#"{"__metadata__":{"format":"pt","note":"a \"quoted\" \u00e9"},
        "fc.weight":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},
        "fc.bias" : { "shape" : [2], "data_offsets" : [24, 32], "dtype" : "F32",
                      "extra": [1, -2.5e3, {"x": null}, true, false, "s"] },
        "half":{"dtype":"F16","shape":[3],"data_offsets":[32,38]}}    "#;

    fn valid_file() -> Vec<u8> {
        file(VALID, &[0u8; 38])
    }

    #[test]
    fn reads_a_valid_header() {
        let bytes = valid_file();
        let h = read(&bytes).unwrap();
        assert_eq!(h.data_start, 8 + VALID.len());
        assert_eq!(h.file_len, 8 + VALID.len() + 38);
        assert_eq!(h.tensors.len(), 3);
        assert_eq!(
            h.tensors["fc.weight"],
            TensorInfo {
                dtype: Dtype::F32,
                shape: vec![2, 3],
                begin: 0,
                end: 24
            }
        );
        assert_eq!(
            h.tensors["fc.bias"],
            TensorInfo {
                dtype: Dtype::F32,
                shape: vec![2],
                begin: 24,
                end: 32
            }
        );
        assert_eq!(h.tensors["half"].dtype, Dtype::F16);
        assert_eq!(h.tensors["half"].shape, vec![3]);
    }

    #[test]
    fn empty_header_and_scalars() {
        let h = read(&file("{}", &[])).unwrap();
        assert!(h.tensors.is_empty());
        assert_eq!(h.data_start, 10);
        // A scalar has shape [] and one element.
        let h = read(&file(
            r#"{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}"#,
            &[0; 8],
        ))
        .unwrap();
        assert_eq!(h.tensors["s"].shape, Vec::<usize>::new());
    }

    #[test]
    fn decodes_string_escapes() {
        let header = r#"{"a\u00e9\"\\\/\b\f\n\r\t\ud83d\ude00z":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
        let h = read(&file(header, &[7])).unwrap();
        let name = h.tensors.keys().next().unwrap();
        assert_eq!(name, "a\u{e9}\"\\/\u{8}\u{c}\n\r\t\u{1F600}z");
        // Raw non-ASCII UTF-8 passes through unchanged.
        let h = read(&file(
            r#"{"größe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
            &[7],
        ))
        .unwrap();
        assert!(h.tensors.contains_key("größe"));
    }

    /// Asserts that `bytes` is rejected with a message containing `needle`.
    fn rejects(bytes: &[u8], needle: &str) {
        match read(bytes) {
            Ok(h) => panic!("accepted {h:?}, expected an error containing {needle:?}"),
            Err(e) => assert!(
                e.contains(needle),
                "error {e:?} does not contain {needle:?}"
            ),
        }
    }

    fn one(dtype: &str, shape: &str, offsets: &str) -> String {
        format!(r#"{{"t":{{"dtype":"{dtype}","shape":{shape},"data_offsets":{offsets}}}}}"#)
    }

    #[test]
    fn rejects_bad_framing() {
        rejects(&[1, 2, 3], "the file is 3 bytes long, too short");
        rejects(&[], "the file is 0 bytes long");
        let mut bytes = valid_file();
        let len = bytes.len() as u64;
        bytes[..8].copy_from_slice(&len.to_le_bytes());
        rejects(&bytes, "runs past the end of the");
        bytes[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        rejects(&bytes, "larger than the 100000000-byte limit");
        let mut bad_utf8 = file("{\"\u{e9}\":1}", &[]);
        bad_utf8[10] = 0xff;
        rejects(&bad_utf8, "not valid UTF-8");
        assert!(matches!(
            read_header(&mut &b"PK\x03\x04\x14\x00\x00\x00"[..], 1000),
            Err(HeaderError::Zip)
        ));
    }

    /// A file that is shorter than its metadata said (it changed after `metadata()`).
    #[test]
    fn a_file_that_ends_early_is_invalid_not_an_io_error() {
        let bytes = valid_file();
        let cut = &bytes[..20];
        match read_header(&mut &cut[..], bytes.len() as u64) {
            Err(HeaderError::Invalid(e)) => assert!(e.contains("ends inside its header"), "{e}"),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    /// Only the header is read: here the reader holds nothing past it, while the file it stands
    /// for has a 1 TiB data section that one tensor covers exactly.
    #[test]
    fn reads_only_the_header() {
        let tib: u64 = 1 << 40;
        let header = one("U8", &format!("[{tib}]"), &format!("[0,{tib}]"));
        let bytes = file(&header, &[]);
        let file_len = bytes.len() as u64 + tib;
        let result = read_header(&mut &bytes[..], file_len).map_err(|e| e.to_string());
        if cfg!(target_pointer_width = "64") {
            let h = result.unwrap();
            assert_eq!(h.file_len as u64, file_len);
            assert_eq!(h.tensors["t"].end as u64, tib);
        } else {
            // A file this large cannot be embedded on a 32-bit host; say so, naming the size.
            let e = result.unwrap_err();
            assert!(
                e.contains(&format!(
                    "the file is {file_len} bytes long, more than a 32-bit"
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn rejects_bad_json() {
        let cases = [
            ("", "invalid header JSON: EOF while parsing a value"),
            (
                "[]",
                "invalid header JSON: invalid type: sequence, expected an object",
            ),
            ("{\"t\" 1}", "expected `:`"),
            ("{\"__metadata__\":{}", "EOF while parsing an object"),
            ("{\"__metadata__\":{} 1", "expected `,` or `}`"),
            ("{} x", "trailing characters"),
            ("{\"a", "EOF while parsing a string"),
            ("{\"a\nb\":1}", "control character"),
            ("{\"a\\x\":1}", "invalid escape"),
            ("{\"a\\u12\":1}", "invalid escape"),
            ("{\"a\\ud800\":1}", "hex escape"),
            ("{\"a\\udc00\":1}", "surrogate in hex escape"),
            (
                "{\"__metadata__\":{\"k\":1}}",
                "`__metadata__` must be an object of strings, found an object",
            ),
            (
                "{\"__metadata__\":[]}",
                "`__metadata__` must be an object of strings, found an array",
            ),
            (
                "{\"__metadata__\":{},\"__metadata__\":{}}",
                "`__metadata__` appears twice",
            ),
            (
                r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":tru}}"#,
                "expected ident",
            ),
            (
                r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":-}}"#,
                "invalid number",
            ),
            (
                r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1.}}"#,
                "invalid number",
            ),
            (
                r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":[1 2]}}"#,
                "expected `,` or `]`",
            ),
        ];
        for (header, needle) in cases {
            rejects(&file(header, &[0; 4]), needle);
        }
    }

    #[test]
    fn rejects_bad_tensor_entries() {
        let cases = [
            (one("F32", "[1]", "[0]"), "tensor `t`: `data_offsets` must have 2 entries, found 1"),
            (one("F32", "[1]", "[0,4,8]"), "must have 2 entries, found 3"),
            (one("F32", "[-1]", "[0,4]"), "tensor `t`: `shape` must hold integers from 0 to 2^64 - 1, found `-1`"),
            (one("F32", "[1.0]", "[0,4]"), "found `1.0`"),
            (one("F32", "[01]", "[0,4]"), "invalid number"),
            (one("F32", "[99999999999999999999999]", "[0,4]"), "found `1e+23`"),
            (one("F32", "[1]", "[0,18446744073709551616]"), "`data_offsets` must hold integers from 0 to 2^64 - 1"),
            (one("F32", "1", "[0,4]"), "tensor `t`: `shape` must be an array, found `1`"),
            (one("F32", "[2]", "[4,0]"), "which end before they begin"),
            (one("F32", "[2]", "[0,8]"), "past the end of the 4-byte data section"),
            (one("F32", "[2]", "[0,4]"), "(F32 [2]) needs 8 bytes, but its data_offsets [0, 4] span 4"),
            (one("F4", "[1]", "[0,1]"), "does not fill a whole number of bytes"),
            (one("F32", "[4294967296, 4294967296]", "[0,4]"), "tensor `t`: the size of shape [4294967296, 4294967296] overflows"),
            (one("U8", "[2]", "[2,4]"), "starts at byte 2 of the data section, but the tensors before it end at byte 0"),
            (one("U8", "[2]", "[0,2]"), "the data section is 4 bytes, but the tensors cover only 2"),
            (one("X9", "[7]", "[0,4]"), "tensor `t` has dtype `X9`, which is not a safetensors dtype"),
            (r#"{"t":{"shape":[1],"data_offsets":[0,4]}}"#.into(), "tensor `t` has no `dtype`"),
            (r#"{"t":{"dtype":"F32","data_offsets":[0,4]}}"#.into(), "tensor `t` has no `shape`"),
            (r#"{"t":{"dtype":"F32","shape":[1]}}"#.into(), "tensor `t` has no `data_offsets`"),
            (r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#.into(), "tensor `t` appears twice"),
            (r#"{"t":{"dtype":3,"shape":[1],"data_offsets":[0,4]}}"#.into(), "tensor `t`: `dtype` must be a string, found `3`"),
            (r#"{"t":[]}"#.into(), "tensor `t`: expected an object with `dtype`, `shape` and `data_offsets`, found an array"),
        ];
        for (header, needle) in cases {
            rejects(&file(&header, &[0; 4]), needle);
        }
    }

    /// An empty tensor may have any dimension; one beyond `usize` is an error only where it does
    /// not fit.
    #[test]
    fn huge_dimensions_of_empty_tensors() {
        let bytes = file(&one("F32", "[0, 4294967296]", "[0,0]"), &[]);
        let result = read(&bytes);
        if cfg!(target_pointer_width = "64") {
            assert_eq!(result.unwrap().tensors["t"].shape, vec![0, 1 << 32]);
        } else {
            let e = result.unwrap_err();
            assert!(
                e.contains("tensor `t`: dimension 4294967296 of shape [0, 4294967296] does not fit in a 32-bit usize"),
                "{e}"
            );
        }
    }

    #[test]
    fn overlapping_tensors_are_rejected() {
        let header = r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}"#;
        rejects(&file(header, &[0; 4]), "tensors before it end at byte 4");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let deep = "[".repeat(100_000);
        let header = format!(r#"{{"t":{{"x":{deep}"#);
        rejects(&file(&header, &[]), "recursion limit exceeded");
        // Within the limit it is just skipped.
        let ok = format!(
            r#"{{"t":{{"x":{}{},"dtype":"U8","shape":[1],"data_offsets":[0,1]}}}}"#,
            "[".repeat(60),
            "]".repeat(60)
        );
        assert!(read(&file(&ok, &[1])).is_ok());
    }

    /// A tiny deterministic generator, so the fuzz loop is reproducible without a dependency.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Whatever `read_header` accepts must satisfy the invariants its callers rely on, and must
    /// load with the `safetensors` crate, as `load_safetensors` does at run time.
    fn check_invariants(bytes: &[u8]) {
        if let Ok(h) = read(bytes) {
            assert_eq!(h.file_len, bytes.len());
            assert!(h.data_start >= 8 && h.data_start <= h.file_len);
            for t in h.tensors.values() {
                assert!(t.begin <= t.end);
                assert!(h.data_start + t.end <= h.file_len);
            }
            if let Err(e) = ::safetensors::SafeTensors::deserialize(bytes) {
                panic!("accepted {h:?}, which the safetensors crate rejects: {e}");
            }
        }
    }

    #[test]
    fn truncations_and_byte_flips_never_panic() {
        let valid = valid_file();
        for n in 0..=valid.len() {
            check_invariants(&valid[..n]);
            if n < valid.len() {
                assert!(read(&valid[..n]).is_err(), "truncation to {n} accepted");
            }
        }
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let interesting = b"{}[]\",:\\u0123456789-.eE tfn\x00\xff";
        for _ in 0..20_000 {
            let mut bytes = valid.clone();
            let flips = 1 + rng.next() % 4;
            for _ in 0..flips {
                let at = (rng.next() % bytes.len() as u64) as usize;
                bytes[at] = if rng.next().is_multiple_of(2) {
                    interesting[(rng.next() % interesting.len() as u64) as usize]
                } else {
                    rng.next() as u8
                };
            }
            check_invariants(&bytes);
        }
    }
}
