//! Weights prepared once: the steps that turn the weights file's tensors into the parameter
//! buffer the kernels read, and, for embedded weights, running them at compile time.
//!
//! A model's parameter buffer (`layout::ParamLayout`) starts as the file's tensors at their
//! slots; [`steps`] lists what then happens to it, one [`Step`] per weight operand that needs
//! it (a batch norm folded into its conv or dense layer, a standalone batch norm's statistics
//! turned into a scale and a shift, a Winograd layer's filters transformed into its own slot,
//! a convolution's weights put into the layout the kernels' GEMM reads in place,
//! `kiln_kernels::pack`). The list is data, and it is executed in two places by
//! the same `kiln_kernels` functions:
//!
//! - at compile time, by [`embed`], for a network with embedded weights: the macro (or the
//!   build driver) reads the file, runs every step and writes the finished buffer as
//!   little-endian `f32`s, which the generated code embeds 64-byte aligned and reads in place
//!   (`new()` copies nothing, the binary's pages are the weights);
//! - at load time, in the generated `prepare` ([`Step::tokens`]), for `from_safetensors` and
//!   for an embedded model whose buffer could not be written at compile time (see below).
//!
//! This is the seam for every "prepare the weights once" transform (the Winograd filter
//! transform is one; another packed layout would be another): a `Step` variant with its `tokens` and `run`,
//! chosen per operand in [`steps`] (and, when it changes what the kernel reads, in the
//! per-op choice codegen asks for, like [`conv_weights`]); both paths pick it up.
//!
//! Packed layouts depend on the kernel table, which is chosen at run time. The embedded buffer
//! holds them in [`EMBEDDED_LAYOUT`], the x86 AVX2/AVX-512 tables' (they share it); `new()`
//! with any other table (portable, NEON) converts a copy, once. Load-time preparation packs
//! straight into the table's layout.
//!
//! Where the prepared file goes: `$OUT_DIR/kiln-prepared/` when the crate has a build script,
//! else `kiln-prepared/` in rustc's `--out-dir` (Cargo's `target/<profile>/deps`). A process
//! that is neither (an IDE's proc-macro server, kiln-dsl's own tests) writes nothing and gets
//! the load-time fallback below. Its name is a hash of the type
//! name, the weights file's path and the buffer's layout, so the same network always maps to the
//! same file and a changed weights file overwrites it. It is written only when its bytes change,
//! by a rename (concurrent builds never read half a file), and given the weights file's
//! modification time: Cargo rebuilds a crate when a file it read is newer than the start of its
//! last build, which a file written during that build would be. If anything fails (a read-only
//! directory, a full disk), [`embed`] returns the reason and codegen falls back to embedding
//! the original file and preparing it in `new()`.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;
use quote::quote;

use kiln_kernels::pack::WeightLayout;

use crate::ir::{Graph, OpKind};
use crate::layout::{ParamLayout, Slot};
use crate::weights::WeightsFile;

/// One preparation of parameter-buffer slots, in place.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Fold batch-norm statistics (gamma, beta, mean, var) into a conv's or dense layer's
    /// weights and bias ([`kiln_kernels::fold_batch_norm`]).
    FoldBatchNorm {
        weight: Slot,
        bias: Slot,
        stats: [Slot; 4],
        eps: f32,
    },
    /// A standalone batch norm's statistics become a per-channel scale and shift
    /// ([`kiln_kernels::batch_norm_scale_shift`]).
    ScaleShift {
        stats: [Slot; 4],
        eps: f32,
        scale: Slot,
        shift: Slot,
    },
    /// A Winograd convolution's (folded) filters, `[c_out, c_in, 3, 3]` at `weight`, into the
    /// Winograd domain at `out`, `[36, c_out, c_in]`
    /// ([`kiln_kernels::winograd::transform_filter`]). After every fold, before every
    /// [`Step::Layout`] (another conv may share the filters and want them packed).
    Winograd {
        weight: Slot,
        out: Slot,
        c_out: usize,
        c_in: usize,
    },
    /// A blocked convolution's (folded) weights, `[c_out, c_in, kh, kw]` at `weight`, packed
    /// for the table's `conv2d_nchwc` at `out` ([`kiln_kernels::nchwc::pack_weights`]), or
    /// with `winograd` transformed for `conv2d_nchwc_winograd`
    /// ([`kiln_kernels::nchwc::winograd::transform_filter`]). After every fold, before every
    /// [`Step::Layout`] (the NCHW plan's conv reads the same weights packed for its GEMM).
    Nchwc {
        weight: Slot,
        out: Slot,
        c_out: usize,
        c_in: usize,
        kh: usize,
        kw: usize,
        winograd: bool,
    },
    /// A convolution's weights, `groups` row-major `m x k` matrices, go into the layout the
    /// table's `conv2d` reads ([`kiln_kernels::pack`]); at compile time, into
    /// `EMBEDDED_LAYOUT`, which `new()` converts from if the table wants another. Always
    /// after every fold (folds scale rows).
    Layout {
        weight: Slot,
        groups: usize,
        m: usize,
        k: usize,
    },
}

/// The layout embedded buffers hold packed weights in (`kiln_runtime`'s `EMBEDDED_LAYOUT`,
/// which generated code passes to `params_in_place`): the x86 SIMD tables' layout.
pub const EMBEDDED_LAYOUT: WeightLayout = WeightLayout::DepthBlocked;

/// How a convolution reads its weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvWeights {
    /// Every layout is the same bytes (depthwise, one depth block) or not a `conv2d` (3-D).
    AsGiven,
    /// Through the table, in its layout (a [`Step::Layout`] put them there).
    Packed,
    /// Shared with a reader that needs another layout: left as given, and the conv calls the
    /// portable kernel, which reads them so, rather than the table's.
    Portable,
}

/// The GEMM matrix `(groups, m, k)` of conv op `op` if its layout matters (a 1-D or 2-D conv,
/// not depthwise, deeper than one block).
fn conv_matrix(graph: &Graph, op: usize) -> Option<(usize, usize, usize)> {
    let op = &graph.ops[op];
    let OpKind::Conv { kernel, groups, .. } = &op.kind else {
        return None;
    };
    let w = &graph.shape(op.args[1]).dims;
    if kernel.len() > 2 || w.len() < 2 || *groups == 0 {
        return None;
    }
    // A Winograd layer reads its transformed filters (`Step::Winograd`), never these, unless
    // the CPU may send it through im2col instead (`layout::few_tiles`).
    if crate::layout::conv_algo(graph, op) == Some(crate::contract::ConvAlgo::Winograd)
        && !crate::layout::few_tiles(graph, op)
    {
        return None;
    }
    let (m, cig) = (w[0] / groups, w[1]);
    let k = cig * kernel.iter().product::<usize>();
    let deep = kiln_kernels::pack::depth_blocks(k).0 > 1;
    (deep && !(cig == 1 && m == 1)).then_some((*groups, m, k))
}

/// How conv op `op` reads its weights: packed unless another op reads the same parameter in
/// another way.
pub fn conv_weights(graph: &Graph, op: usize) -> ConvWeights {
    let Some(matrix) = conv_matrix(graph, op) else {
        return ConvWeights::AsGiven;
    };
    let w = graph.ops[op].args[1];
    let agree = graph.ops.iter().enumerate().all(|(j, other)| {
        !other.args.contains(&w)
            || (other.args.get(1) == Some(&w) && conv_matrix(graph, j) == Some(matrix))
    });
    if agree {
        ConvWeights::Packed
    } else {
        ConvWeights::Portable
    }
}

/// The steps that prepare `graph`'s parameters laid out as `params`, in op order.
pub fn steps(graph: &Graph, params: &ParamLayout) -> Vec<Step> {
    let mut out = Vec::new();
    let mut layouts = Vec::new();
    for (i, op) in graph.ops.iter().enumerate() {
        let slot = |k: usize| {
            params
                .of_value(graph, op.args[k])
                .expect("the IR verifier checked that weights are parameters")
        };
        match &op.kind {
            OpKind::Conv {
                has_bias,
                bn: Some(eps),
                ..
            }
            | OpKind::Dense {
                has_bias,
                bn: Some(eps),
                ..
            } => {
                let bias = if *has_bias {
                    slot(2)
                } else {
                    params.bias[i].expect("layout gives folded layers a bias")
                };
                let first = 2 + usize::from(*has_bias);
                out.push(Step::FoldBatchNorm {
                    weight: slot(1),
                    bias,
                    stats: [0, 1, 2, 3].map(|k| slot(first + k)),
                    eps: *eps,
                });
            }
            OpKind::BatchNorm { eps, .. } => {
                let (scale, shift) =
                    params.scale_shift[i].expect("layout gives batch norms scale and shift");
                out.push(Step::ScaleShift {
                    stats: [1, 2, 3, 4].map(slot),
                    eps: *eps,
                    scale,
                    shift,
                });
            }
            _ => {}
        }
        if let Some(out_slot) = params.winograd[i] {
            out.push(Step::Winograd {
                weight: slot(1),
                out: out_slot,
                c_out: graph.shape(op.result()).channels(),
                c_in: graph.shape(op.args[0]).channels(),
            });
        }
        if let (Some(out_slot), OpKind::Conv { kernel, .. }) = (params.nchwc[i], &op.kind) {
            let [kh, kw] = crate::ir::as_2d(kernel, 1);
            out.push(Step::Nchwc {
                weight: slot(1),
                out: out_slot,
                c_out: graph.shape(op.result()).channels(),
                c_in: graph.shape(op.args[0]).channels(),
                kh,
                kw,
                winograd: crate::blocked::winograd(graph, i),
            });
        }
        if let (ConvWeights::Packed, Some((groups, m, k))) =
            (conv_weights(graph, i), conv_matrix(graph, i))
        {
            let step = Step::Layout {
                weight: slot(1),
                groups,
                m,
                k,
            };
            // A parameter several convs read is laid out once.
            if !layouts.contains(&step) {
                layouts.push(step);
            }
        }
    }
    out.extend(layouts);
    out
}

/// The packed matrices, as `params_in_place` takes them: `(start, groups, m, k)`.
pub fn packed(steps: &[Step]) -> Vec<(usize, usize, usize, usize)> {
    steps
        .iter()
        .filter_map(|s| match *s {
            Step::Layout {
                weight,
                groups,
                m,
                k,
            } => Some((weight.start, groups, m, k)),
            _ => None,
        })
        .collect()
}

/// `start..end` of a slot, as tokens.
pub(crate) fn range(s: Slot) -> TokenStream {
    let (a, b) = (s.start, s.end());
    quote! { #a..#b }
}

/// `eps` exactly, whatever its value (a float literal cannot be infinite or NaN).
fn eps_bits(eps: f32) -> TokenStream {
    let bits = eps.to_bits();
    quote! { ::core::primitive::f32::from_bits(#bits) }
}

impl Step {
    /// The load-time call, on `__params` (the generated `prepare`'s argument).
    pub fn tokens(&self) -> TokenStream {
        match *self {
            Step::FoldBatchNorm {
                weight,
                bias,
                stats,
                eps,
            } => {
                let [g, be, m, v] = stats.map(range);
                let (w, b) = (range(weight), range(bias));
                let eps = eps_bits(eps);
                quote! {{
                    let ([g, b, m, v], [w, bias]) = ::kiln::__private::io(__params, [#g, #be, #m, #v], [#w, #b]);
                    ::kiln::__private::kernels::fold_batch_norm(w, bias, g, b, m, v, #eps);
                }}
            }
            Step::ScaleShift {
                stats,
                eps,
                scale,
                shift,
            } => {
                let [g, be, m, v] = stats.map(range);
                let (scale, shift) = (range(scale), range(shift));
                let eps = eps_bits(eps);
                quote! {{
                    let ([g, b, m, v], [scale, shift]) = ::kiln::__private::io(__params, [#g, #be, #m, #v], [#scale, #shift]);
                    ::kiln::__private::kernels::batch_norm_scale_shift(g, b, m, v, #eps, scale, shift);
                }}
            }
            Step::Winograd {
                weight,
                out,
                c_out,
                c_in,
            } => {
                let (w, u) = (range(weight), range(out));
                quote! {{
                    let ([w], [u]) = ::kiln::__private::io(__params, [#w], [#u]);
                    ::kiln::__private::kernels::winograd::transform_filter(#c_out, #c_in, w, u);
                }}
            }
            Step::Nchwc {
                weight,
                out,
                c_out,
                c_in,
                kh,
                kw,
                winograd,
            } => {
                let (w, o) = (range(weight), range(out));
                let pack = if winograd {
                    quote! { ::kiln::__private::kernels::nchwc::winograd::transform_filter(#c_out, #c_in, w, o) }
                } else {
                    quote! { ::kiln::__private::kernels::nchwc::pack_weights(#c_out, #c_in, #kh, #kw, w, o) }
                };
                quote! {{
                    let ([w], [o]) = ::kiln::__private::io(__params, [#w], [#o]);
                    #pack;
                }}
            }
            Step::Layout {
                weight,
                groups,
                m,
                k,
            } => {
                let w = range(weight);
                quote! {
                    ::kiln::__private::pack_weights(__k.weights, #groups, #m, #k, &mut __params[#w]);
                }
            }
        }
    }

    /// The same preparation, now, on `buf` (the compile-time path).
    pub fn run(&self, buf: &mut [f32]) {
        match *self {
            Step::FoldBatchNorm {
                weight,
                bias,
                stats,
                eps,
            } => {
                let [g, b, m, v] = stats.map(|s| buf[s.start..s.end()].to_vec());
                let (w, bias) = two_mut(buf, weight, bias);
                kiln_kernels::fold_batch_norm(w, bias, &g, &b, &m, &v, eps);
            }
            Step::ScaleShift {
                stats,
                eps,
                scale,
                shift,
            } => {
                let [g, b, m, v] = stats.map(|s| buf[s.start..s.end()].to_vec());
                let (scale, shift) = two_mut(buf, scale, shift);
                kiln_kernels::batch_norm_scale_shift(&g, &b, &m, &v, eps, scale, shift);
            }
            Step::Winograd {
                weight,
                out,
                c_out,
                c_in,
            } => {
                let (w, u) = two_mut(buf, weight, out);
                kiln_kernels::winograd::transform_filter(c_out, c_in, w, u);
            }
            Step::Nchwc {
                weight,
                out,
                c_out,
                c_in,
                kh,
                kw,
                winograd,
            } => {
                let (w, o) = two_mut(buf, weight, out);
                if winograd {
                    kiln_kernels::nchwc::winograd::transform_filter(c_out, c_in, w, o);
                } else {
                    kiln_kernels::nchwc::pack_weights(c_out, c_in, kh, kw, w, o);
                }
            }
            Step::Layout {
                weight,
                groups,
                m,
                k,
            } => {
                let w = &mut buf[weight.start..weight.end()];
                let rows = w.to_vec();
                kiln_kernels::pack::pack(EMBEDDED_LAYOUT, groups, m, k, &rows, w);
            }
        }
    }
}

/// Two disjoint slots of `buf`, mutably (the layout never overlaps slots).
fn two_mut(buf: &mut [f32], a: Slot, b: Slot) -> (&mut [f32], &mut [f32]) {
    if a.start < b.start {
        let (lo, hi) = buf.split_at_mut(b.start);
        (&mut lo[a.start..a.end()], &mut hi[..b.len])
    } else {
        let (lo, hi) = buf.split_at_mut(a.start);
        (&mut hi[..a.len], &mut lo[b.start..b.end()])
    }
}

/// The prepared parameter buffer of an embedded-weights model, written at compile time.
#[derive(Debug)]
pub struct Embedded {
    /// Absolute path of the file, for `include_bytes!`.
    pub path: PathBuf,
    /// Its length in bytes (`4 * ParamLayout::len`).
    pub len: usize,
}

/// Reads the embedded weights file, lays its tensors out as `params` says, runs `steps` and
/// writes the result for `include_bytes!` (where and why so: the module doc). `name` (the
/// generated type's) only names the file. An `Err` is a reason for people; codegen then
/// prepares at load time instead.
pub fn embed(
    w: &WeightsFile,
    params: &ParamLayout,
    steps: &[Step],
    name: &str,
) -> Result<Embedded, String> {
    let dir = prepared_dir().ok_or("not run by rustc or a build script")?;
    let file = fs::read(&w.path).map_err(|e| format!("{}: {e}", w.path.display()))?;
    if file.len() != w.header.file_len {
        return Err(format!("{} changed while compiling", w.path.display()));
    }
    let mut buf = vec![0f32; params.len];
    for (slot, &src) in params.params.iter().zip(&w.offsets) {
        // The header check proved `src + 4 * len <= file_len` for every tensor.
        let bytes = file
            .get(src..src + 4 * slot.len)
            .ok_or_else(|| format!("{}: a tensor lies outside the file", w.path.display()))?;
        for (out, b) in buf[slot.start..slot.end()]
            .iter_mut()
            .zip(bytes.chunks_exact(4))
        {
            *out = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
    }
    for s in steps {
        s.run(&mut buf);
    }
    let bytes: Vec<u8> = buf.iter().flat_map(|v| v.to_le_bytes()).collect();

    let key = format!(
        "{name}\n{}\n{:?}\n{:?}\n{steps:?}",
        w.path.display(),
        params,
        w.offsets
    );
    let path = dir.join(format!("{name}-{:016x}.bin", fnv1a(key.as_bytes())));
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    if fs::read(&path).ok().as_deref() != Some(&bytes[..]) {
        fs::create_dir_all(&dir).map_err(fail)?;
        let tmp = dir.join(format!(
            "{}.{}.tmp",
            path.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            std::process::id()
        ));
        let written = (|| {
            let mut f = fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            // Older than the build that reads it (see the module doc).
            f.set_modified(fs::metadata(&w.path)?.modified()?)?;
            drop(f);
            fs::rename(&tmp, &path)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&tmp);
            return Err(fail(e));
        }
    }
    let path = fs::canonicalize(&path).unwrap_or(path);
    Ok(Embedded {
        path,
        len: bytes.len(),
    })
}

/// Where prepared buffers are written (the module doc says why there), if this process is a
/// build: `None` in a proc-macro server or a plain test process, which then prepare at load
/// time rather than leave files in a temporary directory.
fn prepared_dir() -> Option<PathBuf> {
    if let Some(out) = std::env::var_os("OUT_DIR") {
        return Some(Path::new(&out).join("kiln-prepared"));
    }
    let mut args = std::env::args_os();
    while let Some(a) = args.next() {
        if a == "--out-dir" {
            return args.next().map(|dir| Path::new(&dir).join("kiln-prepared"));
        }
        if let Some(dir) = a.to_str().and_then(|s| s.strip_prefix("--out-dir=")) {
            return Some(Path::new(dir).join("kiln-prepared"));
        }
    }
    None
}

/// 64-bit FNV-1a: a stable hash for file names (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_mut_gives_both_slots_in_either_order() {
        let mut buf: Vec<f32> = (0..10).map(|i| i as f32).collect();
        let a = Slot { start: 6, len: 2 };
        let b = Slot { start: 1, len: 3 };
        let (x, y) = two_mut(&mut buf, a, b);
        assert_eq!((&x[..], &y[..]), (&[6.0, 7.0][..], &[1.0, 2.0, 3.0][..]));
        let (y, x) = two_mut(&mut buf, b, a);
        assert_eq!((&x[..], &y[..]), (&[6.0, 7.0][..], &[1.0, 2.0, 3.0][..]));
    }

    #[test]
    fn fnv1a_is_the_published_function() {
        // Test vectors of the reference implementation.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
