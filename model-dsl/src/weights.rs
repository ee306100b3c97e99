//! The weights file at compile time: find it, read its safetensors header, and check that
//! every parameter the network declares is there with dtype F32 and the declared shape.

use std::path::{Path, PathBuf};

use crate::ir::Graph;
use crate::safetensors::{read_header, Header};
use crate::Errors;

/// A weights file the network embeds, checked against the graph.
#[derive(Debug)]
pub struct WeightsFile {
    /// Absolute path, for `include_bytes!`.
    pub path: PathBuf,
    pub header: Header,
    /// The byte offset of each graph parameter's data in the file.
    pub offsets: Vec<usize>,
}

/// Checks `graph.params` against the file named by `lit`. Reports every problem it finds.
pub fn check(graph: &Graph, lit: &syn::LitStr, base_dir: &Path, errors: &mut Errors) -> Option<WeightsFile> {
    let written = lit.value();
    let path = base_dir.join(&written);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            errors.push(syn::Error::new(lit.span(), format!("cannot read weights file `{written}`: {}", io_reason(&e))));
            return None;
        }
    };
    let header = match read_header(&bytes) {
        Ok(h) => h,
        Err(e) => {
            errors.push(syn::Error::new(lit.span(), format!("`{written}` is not a valid safetensors file: {e}")));
            return None;
        }
    };
    let mut offsets = Vec::with_capacity(graph.params.len());
    let mut ok = true;
    for p in &graph.params {
        match header.tensors.get(&p.key) {
            None => {
                ok = false;
                let mut msg = format!("tensor `{}` is not in `{written}`", p.key);
                let stem = p.key.rsplit_once('.').map_or(p.key.as_str(), |(s, _)| s);
                let near: Vec<&str> = header.tensors.keys().filter(|k| k.starts_with(stem)).map(String::as_str).collect();
                if !near.is_empty() {
                    msg += &format!(" (it has {})", near.join(", "));
                }
                errors.push(syn::Error::new(p.name_span, msg));
            }
            Some(t) if t.dtype != "F32" => {
                ok = false;
                errors.push(syn::Error::new(p.ty_span, format!("tensor `{}` is {} in `{written}`, but kiln expects F32", p.key, t.dtype)));
            }
            Some(t) if t.shape != p.shape => {
                ok = false;
                errors.push(syn::Error::new(
                    p.ty_span,
                    format!("tensor `{}` has shape {:?} in `{written}`, but this declaration needs {:?}", p.key, t.shape, p.shape),
                ));
            }
            Some(t) => offsets.push(header.data_start + t.begin),
        }
    }
    if !ok {
        return None;
    }
    // Canonical, so `include_bytes!` finds it whatever file the expansion lands in.
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    Some(WeightsFile { path, header, offsets })
}

/// The OS error without its platform code, so messages are the same everywhere.
fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "file not found (the path is relative to the file that contains `network!`)".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        _ => e.to_string(),
    }
}
