//! A small reader for the header of a safetensors file, so the compiler can check a network's
//! parameters against its weights file at compile time without depending on serde.
//!
//! The format: an 8-byte little-endian `u64` `n`, then `n` bytes of UTF-8 JSON, then the data
//! section. The JSON is an object mapping each tensor name to
//! `{"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}` (offsets relative to the data
//! section), plus an optional `"__metadata__"` object of strings, which is ignored.
//!
//! Sketch:
//!
//! 1. Read `n`, check that `8 + n` lies inside the file and the header is UTF-8.
//! 2. Parse the JSON with a recursive-descent parser that knows only what a header needs
//!    (objects, arrays, strings with every escape, non-negative integers) and skips any other
//!    value in an unknown field. Nesting is limited to [`MAX_DEPTH`], so hostile input cannot
//!    overflow the stack.
//! 3. Validate each tensor: `begin <= end <= data length`, and for known dtypes
//!    `end - begin == product(shape) * size(dtype)`.
//! 4. Validate the layout as the `safetensors` crate does at run time: tensors are stored back to
//!    back from offset 0 and cover the data section exactly. A file the compiler accepts must also
//!    load with `load_safetensors`, so the two readers agree.
//!
//! Every step returns a `String` error saying what is wrong; no input can make it panic (no
//! fallible indexing, checked arithmetic throughout).

use std::collections::BTreeMap;

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
    /// The element type as the file spells it: `"F32"`, `"F16"`, `"BF16"`, ...
    pub dtype: String,
    /// The dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Start of the tensor's bytes, relative to [`Header::data_start`].
    pub begin: usize,
    /// End (exclusive) of the tensor's bytes, relative to [`Header::data_start`].
    pub end: usize,
}

/// The largest header the `safetensors` crate accepts; larger ones are rejected here too.
const MAX_HEADER_LEN: u64 = 100_000_000;

/// How deeply JSON values may nest. A real header nests three levels; the limit only has to stop
/// a hostile file from exhausting the stack.
const MAX_DEPTH: usize = 64;

/// Parses and validates the header of the safetensors file `bytes` (the whole file).
pub fn read_header(bytes: &[u8]) -> Result<Header, String> {
    let file_len = bytes.len();
    let len_bytes: [u8; 8] = bytes
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            format!("the file is {file_len} bytes long, too short for the 8-byte header length")
        })?;
    let header_len = u64::from_le_bytes(len_bytes);
    if header_len > MAX_HEADER_LEN {
        return Err(format!(
            "the header length {header_len} is larger than the {MAX_HEADER_LEN}-byte limit"
        ));
    }
    let data_start = usize::try_from(header_len)
        .ok()
        .and_then(|n| n.checked_add(8))
        .filter(|&end| end <= file_len)
        .ok_or_else(|| {
            format!("the header length {header_len} runs past the end of the {file_len}-byte file")
        })?;
    let json = bytes.get(8..data_start).unwrap_or_default();
    let json =
        std::str::from_utf8(json).map_err(|e| format!("the header is not valid UTF-8 ({e})"))?;
    let tensors = Parser::new(json).header()?;
    let data_len = file_len - data_start;
    validate(&tensors, data_len)?;
    Ok(Header {
        data_start,
        file_len,
        tensors,
    })
}

/// The size in bits of one element of a dtype, for the dtypes the safetensors format defines.
fn dtype_bits(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "F4" => 4,
        "F6_E2M3" | "F6_E3M2" => 6,
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" | "F8_E8M0" | "F8_E4M3FNUZ"
        | "F8_E5M2FNUZ" => 8,
        "I16" | "U16" | "F16" | "BF16" => 16,
        "I32" | "U32" | "F32" => 32,
        "I64" | "U64" | "F64" | "C64" => 64,
        _ => return None,
    })
}

/// Checks every tensor's offsets and size, then that the tensors tile the data section.
fn validate(tensors: &BTreeMap<String, TensorInfo>, data_len: usize) -> Result<(), String> {
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
        if let Some(bits) = dtype_bits(&t.dtype) {
            let overflow = || format!("tensor `{name}`: the size of shape {:?} overflows", t.shape);
            let count = t
                .shape
                .iter()
                .try_fold(1usize, |n, &d| n.checked_mul(d))
                .ok_or_else(overflow)?;
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
    }

    // Same rule as the `safetensors` crate: sorted by offset, the tensors sit back to back from
    // byte 0 and end exactly at the end of the file.
    let mut order: Vec<(&String, &TensorInfo)> = tensors.iter().collect();
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

/// A recursive-descent JSON parser over the header text, specialised to the header's schema.
struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser { text, pos: 0 }
    }

    /// The error for the current position.
    fn err(&self, what: impl std::fmt::Display) -> String {
        format!("invalid header JSON at byte {}: {what}", self.pos)
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Consumes `b` (after whitespace) or fails naming it.
    fn expect(&mut self, b: u8) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(b) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.err(format_args!(
                "expected `{}`, found {}",
                b as char,
                self.found()
            )))
        }
    }

    /// Describes the next character for error messages.
    fn found(&self) -> String {
        match self.text.get(self.pos..).and_then(|s| s.chars().next()) {
            Some(c) => format!("`{c}`"),
            None => "the end of the header".to_string(),
        }
    }

    /// The whole header: an object of tensors, then only whitespace.
    fn header(&mut self) -> Result<BTreeMap<String, TensorInfo>, String> {
        let mut tensors = BTreeMap::new();
        let mut saw_metadata = false;
        self.object(|p, key| {
            if key == "__metadata__" {
                if std::mem::replace(&mut saw_metadata, true) {
                    return Err(p.err("`__metadata__` appears twice"));
                }
                p.metadata()
            } else {
                let info = p.tensor_info(&key)?;
                if tensors.insert(key.clone(), info).is_some() {
                    return Err(p.err(format_args!("tensor `{key}` appears twice")));
                }
                Ok(())
            }
        })?;
        self.skip_ws();
        if self.pos != self.text.len() {
            return Err(self.err(format_args!(
                "unexpected {} after the header object",
                self.found()
            )));
        }
        Ok(tensors)
    }

    /// Parses `{ "key": value, ... }`, calling `field` after each key's `:` to parse its value.
    fn object(
        &mut self,
        mut field: impl FnMut(&mut Self, String) -> Result<(), String>,
    ) -> Result<(), String> {
        self.expect(b'{')?;
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            let key = self.string()?;
            self.expect(b':')?;
            field(self, key)?;
            self.skip_ws();
            match self.bump() {
                Some(b',') => {}
                Some(b'}') => return Ok(()),
                other => {
                    // Point the error at the offending character, not past it.
                    if other.is_some() {
                        self.pos -= 1;
                    }
                    return Err(self.err(format_args!(
                        "expected `,` or `}}` in an object, found {}",
                        self.found()
                    )));
                }
            }
        }
    }

    /// Parses `[ item, ... ]`, calling `item` for each element.
    fn array(
        &mut self,
        mut item: impl FnMut(&mut Self) -> Result<(), String>,
    ) -> Result<(), String> {
        self.expect(b'[')?;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(());
        }
        loop {
            item(self)?;
            self.skip_ws();
            match self.bump() {
                Some(b',') => {}
                Some(b']') => return Ok(()),
                other => {
                    if other.is_some() {
                        self.pos -= 1;
                    }
                    return Err(self.err(format_args!(
                        "expected `,` or `]` in an array, found {}",
                        self.found()
                    )));
                }
            }
        }
    }

    /// `"__metadata__"`: an object whose values are all strings. The contents are not needed.
    fn metadata(&mut self) -> Result<(), String> {
        self.object(|p, _key| {
            p.skip_ws();
            p.string().map(drop)
        })
    }

    /// One tensor's `{"dtype", "shape", "data_offsets"}`; other fields are skipped.
    fn tensor_info(&mut self, name: &str) -> Result<TensorInfo, String> {
        let mut dtype = None;
        let mut shape = None;
        let mut offsets = None;
        self.object(|p, key| {
            let duplicate = match key.as_str() {
                "dtype" => {
                    p.skip_ws();
                    dtype.replace(p.string()?).is_some()
                }
                "shape" => {
                    let mut dims = Vec::new();
                    p.array(|p| {
                        dims.push(p.integer()?);
                        Ok(())
                    })?;
                    shape.replace(dims).is_some()
                }
                "data_offsets" => {
                    let mut pair = Vec::with_capacity(2);
                    p.array(|p| {
                        pair.push(p.integer()?);
                        Ok(())
                    })?;
                    let [begin, end] = pair[..] else {
                        return Err(p.err(format_args!(
                            "`data_offsets` of tensor `{name}` must have 2 entries, found {}",
                            pair.len()
                        )));
                    };
                    offsets.replace((begin, end)).is_some()
                }
                _ => {
                    p.skip_value(0)?;
                    false
                }
            };
            if duplicate {
                return Err(p.err(format_args!(
                    "field `{key}` of tensor `{name}` appears twice"
                )));
            }
            Ok(())
        })?;
        let missing = |field: &str| self.err(format_args!("tensor `{name}` has no `{field}`"));
        let dtype = dtype.ok_or_else(|| missing("dtype"))?;
        let shape = shape.ok_or_else(|| missing("shape"))?;
        let (begin, end) = offsets.ok_or_else(|| missing("data_offsets"))?;
        Ok(TensorInfo {
            dtype,
            shape,
            begin,
            end,
        })
    }

    /// A non-negative integer that fits in `usize`, with no fraction or exponent.
    fn integer(&mut self) -> Result<usize, String> {
        self.skip_ws();
        let start = self.pos;
        let mut value: usize = 0;
        while let Some(b @ b'0'..=b'9') = self.peek() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(usize::from(b - b'0')))
                .ok_or_else(|| self.err("integer too large"))?;
            self.pos += 1;
        }
        let digits = self.pos - start;
        if digits == 0 {
            return Err(self.err(format_args!(
                "expected a non-negative integer, found {}",
                self.found()
            )));
        }
        if digits > 1 && self.text.as_bytes().get(start) == Some(&b'0') {
            self.pos = start;
            return Err(self.err("integers must not have leading zeros"));
        }
        if let Some(b'.' | b'e' | b'E') = self.peek() {
            return Err(self.err("expected an integer, found a number with a fraction or exponent"));
        }
        Ok(value)
    }

    /// A string, escapes decoded. The caller has skipped whitespace.
    fn string(&mut self) -> Result<String, String> {
        if self.peek() != Some(b'"') {
            return Err(self.err(format_args!("expected a string, found {}", self.found())));
        }
        self.pos += 1;
        let mut out = String::new();
        loop {
            // Copy the run of plain characters up to the next quote, backslash or control
            // character in one go; `text` is valid UTF-8 and these are all ASCII, so the run
            // boundaries are character boundaries.
            let rest = self.text.get(self.pos..).unwrap_or_default();
            let run = rest
                .bytes()
                .position(|b| b == b'"' || b == b'\\' || b < 0x20)
                .unwrap_or(rest.len());
            out.push_str(rest.get(..run).unwrap_or_default());
            self.pos += run;
            match self.bump() {
                Some(b'"') => return Ok(out),
                Some(b'\\') => {
                    let c = self.escape()?;
                    out.push(c);
                }
                Some(_) => {
                    self.pos -= 1;
                    return Err(self.err("control character in a string (it must be escaped)"));
                }
                None => return Err(self.err("unterminated string")),
            }
        }
    }

    /// The character of an escape sequence; the backslash has been consumed.
    fn escape(&mut self) -> Result<char, String> {
        Ok(match self.bump() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let first = self.hex4()?;
                match first {
                    0xD800..=0xDBFF => {
                        // A high surrogate must be followed by `\u` and a low surrogate; the
                        // pair encodes one character above U+FFFF.
                        if self.bump() != Some(b'\\') || self.bump() != Some(b'u') {
                            return Err(self.err("unpaired surrogate in a \\u escape"));
                        }
                        let second = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&second) {
                            return Err(self.err("unpaired surrogate in a \\u escape"));
                        }
                        let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                        char::from_u32(code).ok_or_else(|| self.err("invalid \\u escape"))?
                    }
                    0xDC00..=0xDFFF => return Err(self.err("unpaired surrogate in a \\u escape")),
                    _ => char::from_u32(first).ok_or_else(|| self.err("invalid \\u escape"))?,
                }
            }
            None => return Err(self.err("unterminated string")),
            Some(_) => {
                self.pos -= 1;
                return Err(self.err(format_args!(
                    "invalid escape `\\{}`",
                    self.found().trim_matches('`')
                )));
            }
        })
    }

    /// Four hex digits of a `\u` escape.
    fn hex4(&mut self) -> Result<u32, String> {
        let mut value = 0;
        for _ in 0..4 {
            let digit = self
                .peek()
                .and_then(|b| (b as char).to_digit(16))
                .ok_or_else(|| self.err("expected 4 hex digits after \\u"))?;
            value = value * 16 + digit;
            self.pos += 1;
        }
        Ok(value)
    }

    /// Skips any JSON value (in a field the header reader does not need).
    fn skip_value(&mut self, depth: usize) -> Result<(), String> {
        if depth >= MAX_DEPTH {
            return Err(self.err(format_args!("values nest deeper than {MAX_DEPTH} levels")));
        }
        self.skip_ws();
        match self.peek() {
            Some(b'{') => self.object(|p, _| p.skip_value(depth + 1)),
            Some(b'[') => self.array(|p| p.skip_value(depth + 1)),
            Some(b'"') => self.string().map(drop),
            Some(b'-' | b'0'..=b'9') => self.skip_number(),
            Some(b't') => self.keyword("true"),
            Some(b'f') => self.keyword("false"),
            Some(b'n') => self.keyword("null"),
            _ => Err(self.err(format_args!("expected a value, found {}", self.found()))),
        }
    }

    fn keyword(&mut self, word: &str) -> Result<(), String> {
        if self
            .text
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(word))
        {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.err(format_args!("expected `{word}`")))
        }
    }

    /// A JSON number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    fn skip_number(&mut self) -> Result<(), String> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.skip_digits();
            }
            _ => return Err(self.err("expected digits in a number")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !self.skip_digits() {
                return Err(self.err("expected digits after `.` in a number"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !self.skip_digits() {
                return Err(self.err("expected digits in a number's exponent"));
            }
        }
        Ok(())
    }

    /// Skips decimal digits; whether there were any.
    fn skip_digits(&mut self) -> bool {
        let start = self.pos;
        while let Some(b'0'..=b'9') = self.peek() {
            self.pos += 1;
        }
        self.pos > start
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
        let h = read_header(&bytes).unwrap();
        assert_eq!(h.data_start, 8 + VALID.len());
        assert_eq!(h.file_len, 8 + VALID.len() + 38);
        assert_eq!(h.tensors.len(), 3);
        assert_eq!(
            h.tensors["fc.weight"],
            TensorInfo {
                dtype: "F32".into(),
                shape: vec![2, 3],
                begin: 0,
                end: 24
            }
        );
        assert_eq!(
            h.tensors["fc.bias"],
            TensorInfo {
                dtype: "F32".into(),
                shape: vec![2],
                begin: 24,
                end: 32
            }
        );
        assert_eq!(h.tensors["half"].dtype, "F16");
        assert_eq!(h.tensors["half"].shape, vec![3]);
    }

    #[test]
    fn empty_header_and_scalars() {
        let h = read_header(&file("{}", &[])).unwrap();
        assert!(h.tensors.is_empty());
        assert_eq!(h.data_start, 10);
        // A scalar has shape [] and one element.
        let h = read_header(&file(
            r#"{"s":{"dtype":"F64","shape":[],"data_offsets":[0,8]}}"#,
            &[0; 8],
        ))
        .unwrap();
        assert_eq!(h.tensors["s"].shape, Vec::<usize>::new());
    }

    #[test]
    fn decodes_string_escapes() {
        let header = r#"{"a\u00e9\"\\\/\b\f\n\r\t\ud83d\ude00z":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#;
        let h = read_header(&file(header, &[7])).unwrap();
        let name = h.tensors.keys().next().unwrap();
        assert_eq!(name, "a\u{e9}\"\\/\u{8}\u{c}\n\r\t\u{1F600}z");
        // Raw non-ASCII UTF-8 passes through unchanged.
        let h = read_header(&file(
            r#"{"größe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
            &[7],
        ))
        .unwrap();
        assert!(h.tensors.contains_key("größe"));
    }

    /// Asserts that `bytes` is rejected with a message containing `needle`.
    fn rejects(bytes: &[u8], needle: &str) {
        match read_header(bytes) {
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
    }

    #[test]
    fn rejects_bad_json() {
        let cases = [
            ("", "expected `{`, found the end of the header"),
            ("[]", "expected `{`, found `[`"),
            ("{\"t\" 1}", "expected `:`"),
            (
                "{\"__metadata__\":{}",
                "expected `,` or `}` in an object, found the end",
            ),
            (
                "{\"__metadata__\":{} 1",
                "expected `,` or `}` in an object, found `1`",
            ),
            ("{} x", "unexpected `x` after the header object"),
            ("{\"a", "unterminated string"),
            ("{\"a\nb\":1}", "control character"),
            ("{\"a\\x\":1}", "invalid escape `\\x`"),
            ("{\"a\\u12\":1}", "expected 4 hex digits"),
            ("{\"a\\ud800\":1}", "unpaired surrogate"),
            ("{\"a\\udc00\":1}", "unpaired surrogate"),
            (
                "{\"__metadata__\":{\"k\":1}}",
                "expected a string, found `1`",
            ),
            (
                "{\"__metadata__\":{},\"__metadata__\":{}}",
                "`__metadata__` appears twice",
            ),
            (
                r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":tru}}"#,
                "expected `true`",
            ),
            (
                r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":-}}"#,
                "expected digits",
            ),
            (
                r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1.}}"#,
                "after `.`",
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
            (one("F32", "[1]", "[0]"), "must have 2 entries, found 1"),
            (one("F32", "[1]", "[0,4,8]"), "must have 2 entries, found 3"),
            (one("F32", "[-1]", "[0,4]"), "expected a non-negative integer, found `-`"),
            (one("F32", "[1.0]", "[0,4]"), "fraction or exponent"),
            (one("F32", "[01]", "[0,4]"), "leading zeros"),
            (one("F32", "[99999999999999999999999]", "[0,4]"), "integer too large"),
            (one("F32", "[2]", "[4,0]"), "which end before they begin"),
            (one("F32", "[2]", "[0,8]"), "past the end of the 4-byte data section"),
            (one("F32", "[2]", "[0,4]"), "(F32 [2]) needs 8 bytes, but its data_offsets [0, 4] span 4"),
            (one("F4", "[1]", "[0,1]"), "does not fill a whole number of bytes"),
            (one("F32", "[4294967296, 4294967296]", "[0,4]"), "overflows"),
            (one("U8", "[2]", "[2,4]"), "starts at byte 2 of the data section, but the tensors before it end at byte 0"),
            (one("U8", "[2]", "[0,2]"), "the data section is 4 bytes, but the tensors cover only 2"),
            (r#"{"t":{"shape":[1],"data_offsets":[0,4]}}"#.into(), "tensor `t` has no `dtype`"),
            (r#"{"t":{"dtype":"F32","data_offsets":[0,4]}}"#.into(), "tensor `t` has no `shape`"),
            (r#"{"t":{"dtype":"F32","shape":[1]}}"#.into(), "tensor `t` has no `data_offsets`"),
            (r#"{"t":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#.into(), "field `dtype` of tensor `t` appears twice"),
            (r#"{"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#.into(), "tensor `t` appears twice"),
            (r#"{"t":{"dtype":3,"shape":[1],"data_offsets":[0,4]}}"#.into(), "expected a string, found `3`"),
            (r#"{"t":[]}"#.into(), "expected `{`, found `[`"),
        ];
        for (header, needle) in cases {
            rejects(&file(&header, &[0; 4]), needle);
        }
        // Unknown dtypes are accepted without a size check; the caller decides what to do.
        let h = read_header(&file(&one("X9", "[7]", "[0,4]"), &[0; 4])).unwrap();
        assert_eq!(h.tensors["t"].dtype, "X9");
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
        rejects(&file(&header, &[]), "nest deeper than 64 levels");
        // Within the limit it is just skipped.
        let ok = format!(
            r#"{{"t":{{"x":{}{},"dtype":"U8","shape":[1],"data_offsets":[0,1]}}}}"#,
            "[".repeat(60),
            "]".repeat(60)
        );
        assert!(read_header(&file(&ok, &[1])).is_ok());
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

    /// Whatever `read_header` accepts must satisfy the invariants its callers rely on.
    fn check_invariants(bytes: &[u8]) {
        if let Ok(h) = read_header(bytes) {
            assert_eq!(h.file_len, bytes.len());
            assert!(h.data_start >= 8 && h.data_start <= h.file_len);
            for t in h.tensors.values() {
                assert!(t.begin <= t.end);
                assert!(h.data_start + t.end <= h.file_len);
            }
        }
    }

    #[test]
    fn truncations_and_byte_flips_never_panic() {
        let valid = valid_file();
        for n in 0..=valid.len() {
            check_invariants(&valid[..n]);
            if n < valid.len() {
                assert!(
                    read_header(&valid[..n]).is_err(),
                    "truncation to {n} accepted"
                );
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
