//! The weights file at compile time: find it, read its safetensors header, and check that
//! every parameter the network declares is there with dtype F32 and the declared shape.

use std::path::{Path, PathBuf};

use std::collections::BTreeSet;

use crate::diag::{Errors, Loc};
use crate::ir::Graph;
use crate::safetensors::{read_header, Header};

/// A weights file the network embeds, checked against the graph.
#[derive(Debug)]
pub struct WeightsFile {
    /// Absolute path, for `include_bytes!`.
    pub path: PathBuf,
    pub header: Header,
    /// The byte offset of each graph parameter's data in the file.
    pub offsets: Vec<usize>,
}

/// Checks `graph.params` against the file `written` (relative to `base_dir`), declared at
/// `at`. Reports every problem it finds.
pub fn check(
    graph: &Graph,
    written: &str,
    at: Loc,
    base_dir: &Path,
    errors: &mut Errors,
) -> Option<WeightsFile> {
    let written = written.to_string();
    let path = base_dir.join(&written);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) => {
            errors.push(
                at,
                format!("cannot read weights file `{written}`: {}", io_reason(&e)),
            );
            return None;
        }
    };
    let header = match read_header(&bytes) {
        Ok(h) => h,
        Err(e) => {
            let msg = match bytes.get(..4) {
                Some(b"PK\x03\x04") => format!("`{written}` is a zip archive (a PyTorch checkpoint?), not a safetensors file; convert it with `safetensors.torch.save_file`"),
                _ => format!("`{written}` is not a valid safetensors file: {e}"),
            };
            errors.push(at, msg);
            return None;
        }
    };
    let mut offsets = Vec::with_capacity(graph.params.len());
    let mut ok = true;
    // Layers (`fc` of `fc.weight`) the file has, for "did you mean" hints.
    let file_layers: BTreeSet<&str> = header.tensors.keys().map(|k| layer_of(k)).collect();
    let mut reported_layers = BTreeSet::new();
    for p in &graph.params {
        match header.tensors.get(&p.key) {
            None => {
                ok = false;
                let layer = layer_of(&p.key);
                if !reported_layers.insert(layer) {
                    continue;
                }
                let prefix = format!("{layer}.");
                let has: Vec<&str> = header
                    .tensors
                    .keys()
                    .filter(|k| k.starts_with(&prefix))
                    .map(String::as_str)
                    .collect();
                let msg = if has.is_empty() {
                    // The whole layer is missing: one error for it, not one per tensor.
                    let needs: Vec<&str> = graph
                        .params
                        .iter()
                        .filter(|q| layer_of(&q.key) == layer)
                        .map(|q| q.key.as_str())
                        .collect();
                    let hint = closest(layer, &file_layers)
                        .map(|c| format!("; did you mean `{c}`?"))
                        .unwrap_or_default();
                    format!(
                        "`{written}` has no tensors for `{layer}` (needs {}){hint}",
                        needs.join(", ")
                    )
                } else {
                    format!(
                        "tensor `{}` is not in `{written}` (it has {})",
                        p.key,
                        has.join(", ")
                    )
                };
                errors.push(p.name_loc, msg);
            }
            Some(t) if t.dtype != "F32" => {
                ok = false;
                errors.push(
                    p.ty_loc,
                    format!(
                        "tensor `{}` is {} in `{written}`, but kiln expects F32",
                        p.key, t.dtype
                    ),
                );
            }
            Some(t) if t.shape != p.shape.dims => {
                ok = false;
                errors.push(
                    p.ty_loc,
                    format!("tensor `{}` has shape {:?} in `{written}`, but this declaration needs {:?}", p.key, t.shape, p.shape.dims),
                );
            }
            Some(t) => offsets.push(header.data_start + t.begin),
        }
    }
    if !ok {
        return None;
    }
    // Canonical, so `include_bytes!` finds it whatever file the expansion lands in.
    let path = std::fs::canonicalize(&path).unwrap_or(path);
    Some(WeightsFile {
        path,
        header,
        offsets,
    })
}

/// The layer a tensor belongs to: `fc` for `fc.weight`, `layer1.0.bn1` for
/// `layer1.0.bn1.running_mean`.
fn layer_of(key: &str) -> &str {
    key.rsplit_once('.').map_or(key, |(layer, _)| layer)
}

/// The closest name by edit distance, if it is close enough to be a likely typo.
fn closest<'a>(name: &str, known: &BTreeSet<&'a str>) -> Option<&'a str> {
    let known: Vec<&str> = known.iter().copied().collect();
    crate::diag::closest(name, &known)
}

/// The OS error without its platform code, so messages are the same everywhere.
fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => {
            "file not found (the path is relative to the file that contains `network!`)".to_string()
        }
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "it is a directory".to_string(),
        _ => e.to_string(),
    }
}
