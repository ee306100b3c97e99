//! The build.rs driver (feature `build`): compiles model files into Rust files in `OUT_DIR`,
//! which the user includes with `kiln::include_model!("name")`.
//!
//! ```no_run
//! // build.rs
//! fn main() -> Result<(), kiln_dsl::build::BuildError> {
//!     kiln_dsl::Builder::new()
//!         .model("models/net.kiln")
//!         .model("models/det.onnx")
//!         .compile()
//! }
//! ```
//!
//! Two kinds of file, two front ends, one pipeline ([`crate::pipeline`]) and one code generator:
//!
//! * `.kiln` — the `network!` grammar in a file (weights paths relative to the file). Parsed
//!   with syn from the file's text, so every token has a line and column; errors render rustc
//!   style (`path:line:col`, the source line and a caret), all of them at once.
//! * `.onnx` — [`crate::front::onnx`]. Its initializers (and folded constants) are written to
//!   `OUT_DIR/kiln/<name>.safetensors`, which the generated code embeds like a DSL weights file.
//!
//! Conventions of prost-build and cxx-build: every output is written only when its bytes
//! change (so Cargo does not rebuild dependents for nothing), `cargo:rerun-if-changed` is printed
//! for every model, weights and external-data file, and a failure is an error value whose
//! `Debug` is the rendered messages (what `fn main() -> Result<..>` prints), never a panic.

use std::fmt;
use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;

use crate::codegen::{Param, Signature};
use crate::diag::Errors;
use crate::{Compiled, Failure};

/// Compiles model files for a build script. See the module docs.
#[derive(Debug, Default)]
pub struct Builder {
    /// Each file and the name `include_model!` takes.
    models: Vec<(PathBuf, String)>,
    out_dir: Option<PathBuf>,
    quiet: bool,
    /// Whether ONNX weights are embedded (`new()`); see [`Builder::embed_weights`].
    no_embed: bool,
    /// Per model (as `models`): what an ONNX file does not say about its inputs.
    options: Vec<crate::front::onnx::Options>,
}

/// What happened to one model.
#[derive(Debug)]
pub struct Report {
    /// The name `include_model!` takes: the file stem.
    pub name: String,
    pub path: PathBuf,
    /// The generated file, or the rendered errors.
    pub result: Result<PathBuf, String>,
}

/// Every model's rendered errors (the models that compiled are written anyway).
pub struct BuildError {
    pub message: String,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The rendered messages, so that `fn main() -> Result<(), BuildError>` prints them as they are.
impl fmt::Debug for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\n{}", self.message)
    }
}

impl std::error::Error for BuildError {}

impl Builder {
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Adds a model file: `.kiln` or `.onnx`, relative to the current directory (Cargo runs
    /// build scripts in the package's directory).
    pub fn model(self, path: impl AsRef<Path>) -> Builder {
        let name = stem(path.as_ref());
        self.model_named(path, name)
    }

    /// Adds a model under another name than its file stem (`include_model!(name)`; the type
    /// of an ONNX model is `name` in CamelCase).
    pub fn model_named(mut self, path: impl AsRef<Path>, name: impl Into<String>) -> Builder {
        self.models.push((path.as_ref().to_path_buf(), name.into()));
        self.options.push(Default::default());
        self
    }

    /// The sizes of input `input` of the ONNX model added last: for an input whose sizes the
    /// file leaves symbolic (`dim_param`) or out, and for the elements of a sequence input.
    /// Every size the file does state must agree (a compile error otherwise).
    pub fn input_shape(mut self, input: &str, dims: &[usize]) -> Builder {
        if let Some(o) = self.options.last_mut() {
            o.input_shapes.insert(input.to_string(), dims.to_vec());
        }
        self
    }

    /// The number of elements of sequence input `input` of the ONNX model added last (ONNX
    /// types say only the element type). The generated `run` takes it as one
    /// `kiln::Seq<'_, T, len>`.
    pub fn seq_input(mut self, input: &str, len: usize) -> Builder {
        if let Some(o) = self.options.last_mut() {
            o.seq_lens.insert(input.to_string(), len);
        }
        self
    }

    /// Where the generated files go (default: `$OUT_DIR`); each model writes
    /// `<dir>/kiln/<name>.rs`.
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Builder {
        self.out_dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Whether the generated ONNX models embed their weights (the default). Without, the
    /// weights file is still written (`$OUT_DIR/kiln/<name>.safetensors`) but the type has only
    /// `from_safetensors`: for very large models, whose bytes would bloat the binary.
    pub fn embed_weights(mut self, embed: bool) -> Builder {
        self.no_embed = !embed;
        self
    }

    /// Do not print `cargo:` lines (for tests of the builder itself).
    pub fn quiet(mut self) -> Builder {
        self.quiet = true;
        self
    }

    /// Compiles every model, then fails with all their errors if any had some.
    pub fn compile(&self) -> Result<(), BuildError> {
        let failed: Vec<String> = self
            .compile_each()
            .into_iter()
            .filter_map(|r| r.result.err())
            .collect();
        if failed.is_empty() {
            Ok(())
        } else {
            Err(BuildError {
                message: failed.join("\n"),
            })
        }
    }

    /// Compiles every model and says how each went, without failing (a test suite that
    /// expects some models to be unsupported).
    pub fn compile_each(&self) -> Vec<Report> {
        let out = match self
            .out_dir
            .clone()
            .or_else(|| std::env::var_os("OUT_DIR").map(PathBuf::from))
        {
            Some(d) => d.join("kiln"),
            None => {
                return self
                    .models
                    .iter()
                    .map(|(p, name)| Report {
                        name: name.clone(),
                        path: p.clone(),
                        result: Err("error: OUT_DIR is not set: kiln_dsl::Builder runs in a build script (or give it .out_dir(...))".into()),
                    })
                    .collect()
            }
        };
        self.models
            .iter()
            .enumerate()
            .map(|(k, (path, name))| {
                let name = name.clone();
                let mut inputs = vec![path.clone()];
                let model = Model {
                    path,
                    name: &name,
                    out: &out,
                    embed: !self.no_embed,
                    options: &self.options[k],
                };
                let result = std::fs::create_dir_all(&out)
                    .map_err(|e| format!("error: cannot create {}: {e}", out.display()))
                    .and_then(|()| one_model(&model, &mut inputs));
                if !self.quiet {
                    for f in &inputs {
                        println!("cargo:rerun-if-changed={}", f.display());
                    }
                }
                Report {
                    name,
                    path: path.clone(),
                    result,
                }
            })
            .collect()
    }
}

fn stem(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Writes `bytes` to `path` unless it already holds exactly them.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if same_contents(path, bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(|e| format!("error: cannot write {}: {e}", path.display()))
}

/// Whether the file at `path` holds exactly `bytes`, compared a block at a time (a weights file
/// is ~100 MB: reading it whole would be one more copy of it in memory).
fn same_contents(path: &Path, bytes: &[u8]) -> bool {
    use std::io::Read;
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    if f.metadata().map(|m| m.len()).ok() != u64::try_from(bytes.len()).ok() {
        return false;
    }
    let mut block = vec![0u8; 1 << 20];
    let mut rest = bytes;
    while !rest.is_empty() {
        let n = block.len().min(rest.len());
        if f.read_exact(&mut block[..n]).is_err() || block[..n] != rest[..n] {
            return false;
        }
        rest = &rest[n..];
    }
    true
}

/// One model to compile: its file, name, output directory and options.
struct Model<'a> {
    path: &'a Path,
    name: &'a str,
    out: &'a Path,
    embed: bool,
    options: &'a crate::front::onnx::Options,
}

/// Compiles one model into `out/<name>.rs`; `inputs` collects the files it read.
fn one_model(m: &Model<'_>, inputs: &mut Vec<PathBuf>) -> Result<PathBuf, String> {
    let (path, name, out) = (m.path, m.name, m.out);
    let shown = path.display().to_string();
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let code = match ext {
        "kiln" => kiln_file(path, &shown, inputs)?,
        #[cfg(feature = "onnx")]
        "onnx" => onnx_file(m, &shown, inputs)?,
        _ => {
            return Err(format!(
                "error: {shown}: kiln compiles `.kiln` and `.onnx` files, not `.{ext}`"
            ))
        }
    };
    let code = allow_lints(code);
    let text = format!("// @generated by kiln_dsl::Builder from {shown}; do not edit.\n{code}\n");
    let dst = out.join(format!("{name}.rs"));
    write_if_changed(&dst, text.as_bytes())?;
    Ok(dst)
}

/// Marks every generated item `#[allow(...)]`: lints skip what a proc macro expands to, but an
/// `include!`d file is linted as if the user had written it, and the same code must not warn
/// from a file when it does not from `network!`.
fn allow_lints(code: TokenStream) -> TokenStream {
    let Ok(mut file) = syn::parse2::<syn::File>(code.clone()) else {
        return code;
    };
    let allow: syn::Attribute =
        syn::parse_quote!(#[allow(clippy::all, clippy::pedantic, dead_code)]);
    for item in &mut file.items {
        let attrs = match item {
            syn::Item::Struct(i) => &mut i.attrs,
            syn::Item::Const(i) => &mut i.attrs,
            syn::Item::Impl(i) => &mut i.attrs,
            syn::Item::Static(i) => &mut i.attrs,
            syn::Item::Fn(i) => &mut i.attrs,
            _ => continue,
        };
        attrs.push(allow.clone());
    }
    quote::ToTokens::into_token_stream(file)
}

fn kiln_file(path: &Path, shown: &str, inputs: &mut Vec<PathBuf>) -> Result<TokenStream, String> {
    let src =
        std::fs::read_to_string(path).map_err(|e| format!("error: cannot read {shown}: {e}"))?;
    let render = |e: syn::Error| render_spans(&e, shown, &src);
    let def: crate::syntax::NetworkDef = syn::parse_str(&src).map_err(render)?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let c = crate::compile(&def, Some(dir)).map_err(render)?;
    if let Some(w) = &c.weights {
        inputs.push(w.path.clone());
    }
    Ok(crate::generate(&c, &Signature::of(&def)))
}

/// `error: msg` then ` --> path:line:col`, the line and a caret under the token, per error.
fn render_spans(e: &syn::Error, path: &str, src: &str) -> String {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = String::new();
    for e in e.clone() {
        let (start, end) = (e.span().start(), e.span().end());
        let msg = e.to_string();
        if start.line == 0 {
            out.push_str(&format!("error: {msg}\n --> {path}\n"));
            continue;
        }
        let line = lines.get(start.line - 1).copied().unwrap_or("");
        let num = start.line.to_string();
        let pad = " ".repeat(num.len());
        let width = if end.line == start.line && end.column > start.column {
            end.column - start.column
        } else {
            1
        };
        let indent: String = line
            .chars()
            .take(start.column)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        out.push_str(&format!(
            "error: {msg}\n{pad}--> {path}:{}:{}\n{pad} |\n{num} | {line}\n{pad} | {indent}{}\n",
            start.line,
            start.column + 1,
            "^".repeat(width)
        ));
    }
    out
}

#[cfg(feature = "onnx")]
fn onnx_file(m: &Model<'_>, shown: &str, inputs: &mut Vec<PathBuf>) -> Result<TokenStream, String> {
    use crate::front::onnx;
    let (path, name, out, embed) = (m.path, m.name, m.out, m.embed);
    let bytes = std::fs::read(path).map_err(|e| format!("error: cannot read {shown}: {e}"))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut errors = Errors::default();
    let imported = onnx::import_with(&bytes, &dir, m.options, &mut errors);
    inputs.extend(imported.external_files.iter().cloned());
    let render = |errors: &Errors| {
        errors
            .iter()
            .map(|d| format!("error: {shown}: {}: {}\n", imported.describe(d.at), d.msg))
            .collect::<String>()
    };
    if !errors.is_empty() {
        return Err(render(&errors));
    }
    // The weights: a safetensors file beside the generated code, embedded like a DSL's.
    let file = format!("{name}.safetensors");
    let bytes = safetensors_bytes(&imported.weights).map_err(|e| format!("error: {shown}: {e}"))?;
    write_if_changed(&out.join(&file), &bytes)?;
    let weights = (embed && !imported.weights.is_empty()).then(|| crate::WeightsRef {
        written: file,
        base_dir: out.to_path_buf(),
        at: crate::diag::Loc(0),
    });
    let c: Compiled = match crate::pipeline(imported.graph.clone(), weights, Errors::default()) {
        Ok(c) => c,
        Err(Failure::User(e)) => return Err(render(&e)),
        Err(Failure::Internal(msg)) => return Err(format!("error: {shown}: {msg}\n")),
    };
    let ident = |s: &str| syn::Ident::new(s, proc_macro2::Span::call_site());
    let doc = format!("The model compiled from `{shown}`.");
    let sig = Signature {
        attrs: vec![syn::parse_quote!(#[doc = #doc])],
        vis: syn::parse_quote!(pub),
        name: ident(&type_name(name)),
        inputs: imported
            .input_idents
            .iter()
            .zip(&imported.input_seq_lens)
            // ONNX types never give a sequence's length: `Builder::seq_input` fixes it, so an
            // imported sequence input is never a run-time one.
            .map(|(s, &seq_len)| Param {
                name: ident(s),
                seq_len,
                run_seq: false,
            })
            .collect(),
    };
    Ok(crate::generate(&c, &sig))
}

/// `det` → `Det`, `light_resnet50` → `LightResnet50`, `3d-net` → `M3dNet`.
pub fn type_name(stem: &str) -> String {
    let mut s = String::new();
    for part in stem.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut cs = part.chars();
        if let Some(c) = cs.next() {
            s.push(c.to_ascii_uppercase());
            s.extend(cs);
        }
    }
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'M');
    }
    s
}

#[cfg(feature = "onnx")]
fn safetensors_bytes(weights: &[crate::front::onnx::Weight]) -> Result<Vec<u8>, String> {
    use safetensors::tensor::TensorView;
    // The f32s' own bytes when the host is little-endian (no copy, and no element-by-element
    // loop, which runs unoptimised in a build script); swapped copies otherwise.
    let data: Vec<std::borrow::Cow<[u8]>> = weights
        .iter()
        .map(|w| {
            let bytes: &[u8] = bytemuck::cast_slice(&w.data);
            if cfg!(target_endian = "little") {
                std::borrow::Cow::Borrowed(bytes)
            } else {
                std::borrow::Cow::Owned(w.data.iter().flat_map(|x| x.to_le_bytes()).collect())
            }
        })
        .collect();
    let views = weights
        .iter()
        .zip(&data)
        .map(|(w, d)| {
            TensorView::new(safetensors::Dtype::F32, w.dims.clone(), &d[..])
                .map(|v| (w.key.clone(), v))
                .map_err(|e| format!("weights `{}`: {e}", w.key))
        })
        .collect::<Result<Vec<_>, _>>()?;
    safetensors::serialize(views, None).map_err(|e| format!("writing the weights: {e}"))
}
