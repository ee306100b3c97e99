//! The weights file at compile time: find it, read its safetensors header (only the header), and
//! check that every parameter the network declares is there with dtype F32 and the declared
//! shape.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use ::safetensors::Dtype;

use crate::diag::{Errors, Loc};
use crate::ir::Graph;
use crate::safetensors::{read_header, Header, HeaderError};

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
    let header = match read_weights_header(&path) {
        Ok(h) => h,
        Err(e) => {
            let msg = match e {
                ReadError::NotRead(reason) => {
                    format!("cannot read weights file `{written}`: {reason}")
                }
                ReadError::Header(HeaderError::Io(e)) => {
                    format!("cannot read weights file `{written}`: {}", io_reason(&e))
                }
                ReadError::Header(HeaderError::Zip) => format!("`{written}` is a zip archive (a PyTorch checkpoint?), not a safetensors file; convert it with `safetensors.torch.save_file`"),
                ReadError::Header(HeaderError::Invalid(e)) => {
                    format!("`{written}` is not a valid safetensors file: {e}")
                }
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
            Some(t) if t.dtype != Dtype::F32 => {
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

/// Why the weights file's header could not be read.
enum ReadError {
    /// The file could not be opened, or is not a regular file; the reason, for people.
    NotRead(String),
    /// Reading or validating the header failed.
    Header(HeaderError),
}

/// Opens the weights file and reads only its header.
///
/// Anything but a regular file is refused before it is opened: reading a device such as
/// `/dev/zero` would never end, and opening a named pipe blocks until something writes to it,
/// which would hang the build. The file's length comes from its metadata, not from reading it.
fn read_weights_header(path: &Path) -> Result<Header, ReadError> {
    let not_read = |e: &std::io::Error| ReadError::NotRead(io_reason(e));
    let regular = |meta: &std::fs::Metadata| {
        if meta.is_file() {
            Ok(())
        } else if meta.is_dir() {
            Err(ReadError::NotRead("it is a directory".to_string()))
        } else {
            Err(ReadError::NotRead(
                "it is not a regular file (a device, named pipe or socket?)".to_string(),
            ))
        }
    };
    // `metadata` follows symlinks, so a link to a weights file is fine.
    regular(&std::fs::metadata(path).map_err(|e| not_read(&e))?)?;
    let mut file = File::open(path).map_err(|e| not_read(&e))?;
    // Asked again of the open file, in case the path changed in between.
    let meta = file.metadata().map_err(|e| not_read(&e))?;
    regular(&meta)?;
    read_header(&mut file, meta.len()).map_err(ReadError::Header)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn not_read(path: &Path) -> String {
        match read_weights_header(path) {
            Err(ReadError::NotRead(reason)) => reason,
            Err(ReadError::Header(e)) => panic!("expected NotRead, got a header error: {e}"),
            Ok(h) => panic!("expected NotRead, got {h:?}"),
        }
    }

    /// A device would be read forever (`/dev/zero`) or block (`/dev/tty`); it is refused unread.
    #[cfg(unix)]
    #[test]
    fn refuses_devices() {
        let reason = not_read(Path::new("/dev/zero"));
        assert_eq!(
            reason,
            "it is not a regular file (a device, named pipe or socket?)"
        );
        assert_eq!(not_read(Path::new("/")), "it is a directory");
    }

    /// Opening a named pipe for reading blocks until a writer opens it; the check must refuse it
    /// without opening it. Run on another thread, so a regression fails instead of hanging.
    #[cfg(unix)]
    #[test]
    fn refuses_named_pipes_without_blocking() {
        let dir = std::env::temp_dir().join(format!("kiln-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("weights.safetensors");
        let _ = std::fs::remove_file(&fifo);
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipped: `mkfifo` is not available");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || tx.send(not_read(&path)));
        let reason = rx.recv_timeout(std::time::Duration::from_secs(20));
        let _ = std::fs::remove_file(&fifo);
        let _ = std::fs::remove_dir(&dir);
        assert_eq!(
            reason.expect("reading the header of a named pipe blocked"),
            "it is not a regular file (a device, named pipe or socket?)"
        );
    }

    #[test]
    fn reads_the_header_of_a_regular_file() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/mlp.safetensors");
        let header = match read_weights_header(&path) {
            Ok(h) => h,
            Err(_) => panic!("cannot read {}", path.display()),
        };
        let len = std::fs::metadata(&path).unwrap().len();
        assert_eq!(header.file_len as u64, len);
        assert!(!header.tensors.is_empty());
        assert!(not_read(&path.with_extension("missing")).starts_with("file not found"));
    }
}
