//! kiln-dsl: the compiler behind `kiln::network!`.
//!
//! The pipeline ([`compile`]) is: parse ([`syntax`]) → build the graph ([`front::dsl`]) →
//! infer types and shapes ([`infer`]) → check the weights file ([`weights`]) → fold and fuse
//! ([`fuse`]) → plan memory ([`layout`], [`plan`]) → verify the plan ([`verify`]) → prepare
//! the weights ([`prepare`]: at compile time when they are embedded) → generate Rust
//! ([`codegen`]). The IR ([`ir`]) is checked by its verifier after inference and after
//! fusion. User mistakes are [`diag::Diag`]s at locations the front end renders (for the macro,
//! `syn::Error`s at the user's tokens), collected across the whole network; a broken invariant
//! is an internal error, reported as such with the IR or the plan attached.
//!
//! Modules import only from lower layers: (1) `diag`, `contract`, `syntax`, `plan`,
//! `safetensors`; (2) `ir`, `verify`; (3) the passes `infer`, `fuse`, `weights`, `layout`;
//! (4) `alias` (on `layout`), `front`, `prepare` (on `layout`, `weights`); (5) `codegen`;
//! (6) this file, the driver (ARCHITECTURE.md has the details).

pub mod alias;
pub mod blocked;
#[cfg(feature = "build")]
pub mod build;
pub mod codegen;
pub mod contract;
pub mod diag;
pub mod front;
pub mod fuse;
pub mod infer;
pub mod ir;
pub mod layout;
pub mod plan;
pub mod prepare;
pub mod safetensors;
pub mod syntax;
pub mod verify;
pub mod weights;

use std::path::PathBuf;

use proc_macro2::{Span, TokenStream};

use crate::diag::Errors;

#[cfg(feature = "build")]
pub use build::Builder;

/// Everything the compiler worked out about one network.
#[derive(Debug)]
pub struct Compiled {
    /// The front end's graph, untyped.
    pub source: ir::Graph,
    /// One per precompiled shape (one for a network without size symbols).
    pub variants: Vec<Variant>,
    /// The prepared parameter buffer, the same for every variant.
    pub params: layout::ParamLayout,
    pub weights: Option<weights::WeightsFile>,
}

/// The network compiled for one binding of its size symbols.
#[derive(Debug)]
pub struct Variant {
    /// The value of each size symbol (indexed like `source.symbols`).
    pub binding: Vec<usize>,
    /// `h = 224, w = 224`; empty without symbols.
    pub label: String,
    /// The typed graph, before fusion.
    pub typed: ir::Graph,
    /// The graph the plan and the generated code are for (typed, fused).
    pub graph: ir::Graph,
    pub planned: layout::Planned,
    pub plan: plan::Plan,
    /// The plan with some convolutions in the blocked channel layout (`blocked`), when any
    /// gains; the generated code runs it where the kernel table says so.
    pub blocked: Option<BlockedPlan>,
}

/// A variant planned with the blocked layout.
#[derive(Debug)]
pub struct BlockedPlan {
    pub choice: blocked::Blocked,
    pub planned: layout::Planned,
    pub plan: plan::Plan,
}

impl Variant {
    /// One line per 1-D/2-D convolution saying which algorithm runs it (the compiler's choice,
    /// `contract::conv_algo`), for `Model::PLAN`; empty without convolutions.
    fn conv_algorithms(&self) -> String {
        let g = &self.graph;
        let mut out = String::new();
        for op in &g.ops {
            let Some(algo) = layout::conv_algo(g, op) else {
                continue;
            };
            if out.is_empty() {
                out.push_str("conv algorithms:\n");
            }
            let name = result_name(&self.planned, op);
            let (x, y) = (g.shape(op.args[0]), g.shape(op.result()));
            let either = if layout::few_tiles(g, op) {
                " or im2col + gemm, by CPU (Kernels::few_tiles_winograd)"
            } else {
                ""
            };
            out.push_str(&format!(
                "  {name}: {} -> {}: {}{either}\n",
                x,
                y,
                algo.describe()
            ));
        }
        out
    }
}

/// How a plan names op `op`'s result (`%16 a = conv2d`), empty if it has no planned value.
fn result_name(planned: &layout::Planned, op: &ir::Op) -> String {
    planned.slot[op.result().index()]
        .map_or_else(String::new, |s| planned.problem.values[s].name.clone())
}

impl Compiled {
    /// The printed memory plan (what `Model::PLAN` holds): one per variant, each under its
    /// binding when there are symbols.
    pub fn plan_text(&self) -> String {
        let mut out = String::new();
        for v in &self.variants {
            if !v.label.is_empty() {
                out.push_str(&format!("variant {}:\n", v.label));
            }
            out.push_str(&v.plan.render(&v.planned.problem));
            out.push_str(&v.conv_algorithms());
            if let Some(b) = &v.blocked {
                out.push_str(
                    "blocked layout (the plan `run` takes where the kernel table's blocked \
                     convolution is the faster, kiln_kernels::Kernels::blocked):\n",
                );
                out.push_str(&b.plan.render(&b.planned.problem));
                out.push_str("blocked convolutions (NCHW16c):\n");
                let convs = v.graph.ops.iter().enumerate().zip(&b.choice.convs);
                for ((i, op), _) in convs.filter(|(_, &blocked)| blocked) {
                    let name = result_name(&b.planned, op);
                    let (x, y) = (v.graph.shape(op.args[0]), v.graph.shape(op.result()));
                    let algo = if b.choice.winograd(&v.graph, i) {
                        "winograd F(4x4,3x3)"
                    } else {
                        "direct"
                    };
                    out.push_str(&format!("  {name}: {x} -> {y} ({algo})\n"));
                }
            }
        }
        out
    }
}

fn internal_error(what: &str, detail: &str) -> syn::Error {
    syn::Error::new(Span::call_site(), internal_message(what, detail))
}

fn internal_message(what: &str, detail: &str) -> String {
    format!("kiln internal error (a compiler bug, not a mistake in the model; please report it): {what}\n{detail}")
}

/// A weights file as the model names it: the path as written (messages quote it), the
/// directory it is relative to, and where it was written.
#[derive(Debug)]
pub struct WeightsRef {
    pub written: String,
    pub base_dir: PathBuf,
    pub at: diag::Loc,
}

/// Why the shared part of the pipeline stopped: the model's mistakes (at the front end's
/// locations, for it to render) or a compiler bug (already a message).
#[derive(Debug)]
pub enum Failure {
    User(Errors),
    Internal(String),
}

/// `h = 224, w = 224`.
fn label(symbols: &[String], binding: &[usize]) -> String {
    symbols
        .iter()
        .zip(binding)
        .map(|(s, v)| format!("{s} = {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs every pass of the DSL. `base_dir` is where relative weights paths start (the directory
/// of the file containing the macro call); `None` means the crate root (`CARGO_MANIFEST_DIR`).
///
/// With size symbols, inference, fusion, planning and verification run once per listed shape;
/// the first shape whose inference fails stops the compilation, and its errors name the shape.
pub fn compile(
    def: &syntax::NetworkDef,
    base_dir: Option<PathBuf>,
) -> Result<Compiled, syn::Error> {
    let mut errors = Errors::default();
    let mut lowered = front::dsl::lower(def, &mut errors);
    let base_dir = base_dir
        .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from))
        .unwrap_or_default();
    let weights = lowered.weights_file.as_ref().map(|lit| WeightsRef {
        written: lit.value(),
        base_dir: base_dir.clone(),
        at: lowered.spans.at(lit.span()),
    });
    match pipeline(lowered.graph, weights, errors) {
        Ok(c) => Ok(c),
        Err(Failure::User(errors)) => Err(lowered
            .spans
            .render_all(&errors)
            .unwrap_or_else(|| internal_error("an error without a message", ""))),
        Err(Failure::Internal(msg)) => Err(syn::Error::new(Span::call_site(), msg)),
    }
}

/// The passes every front end shares, from an untyped graph to a verified plan: inference
/// (per binding of the size symbols), the weights file's check (`weights`: its path and where
/// it was declared), the IR verifier, fusion, planning and the plan verifier. `errors` holds
/// what the front end already found; inference still runs once to report its own errors too.
pub fn pipeline(
    source: ir::Graph,
    weights: Option<WeightsRef>,
    mut errors: Errors,
) -> Result<Compiled, Failure> {
    let mut typed = Vec::new();
    if errors.is_empty() {
        for binding in &source.bindings {
            let before = errors.len();
            match infer::infer(&source, binding, &mut errors) {
                Some(g) => typed.push((binding.clone(), g)),
                None => {
                    if !binding.is_empty() {
                        let l = label(&source.symbols, binding);
                        errors.annotate_from(before, &format!(" (in the variant {l})"));
                    }
                    break;
                }
            }
        }
    } else {
        // Still report the shape errors of the parts that were built, once.
        let binding = source.bindings.first().cloned().unwrap_or_default();
        infer::infer(&source, &binding, &mut errors);
    }
    for (_, g) in &typed {
        alias::check(g, &mut errors);
    }
    let weights = match (&weights, typed.first()) {
        (Some(w), Some((_, g))) if errors.is_empty() => {
            weights::check(g, &w.written, w.at, &w.base_dir, &mut errors)
        }
        _ => None,
    };
    if !errors.is_empty() {
        return Err(Failure::User(errors));
    }
    let internal = |what: &str, detail: String| Failure::Internal(internal_message(what, &detail));
    let mut variants = Vec::new();
    let mut params: Option<layout::ParamLayout> = None;
    for (binding, typed) in typed {
        if let Err(msg) = ir::verify::verify(&typed) {
            return Err(internal(
                &format!("the typed IR is malformed: {msg}"),
                ir::print::print(&typed),
            ));
        }
        let graph = fuse::fuse(&typed, &layout::conv_algo);
        if let Err(msg) = ir::verify::verify(&graph) {
            return Err(internal(
                &format!("fusion broke the IR: {msg}"),
                ir::print::print(&graph),
            ));
        }
        let (planned, plan) = plan_graph(&graph, None)?;
        // Declared in-place ops were proven safe; the planner must have honoured them.
        for op in graph.ops.iter().filter(|o| o.in_place) {
            let root = |v: ir::ValueId| match planned.slot[v.index()].map(|s| &plan.values[s]) {
                Some(plan::ValuePlacement::Arena(p)) => p.root,
                _ => None,
            };
            if root(op.result()).is_none() || root(op.result()) != root(op.args[0]) {
                return Err(internal(
                    &format!(
                        "the declared in-place {} was not planned in place",
                        op.kind.name()
                    ),
                    plan.render(&planned.problem),
                ));
            }
        }
        // The blocked plan: only for a network without size symbols (the parameter buffer,
        // which holds the blocked convolutions' packed weights, is shared by every variant, and
        // `run` chooses between variants by shape, between plans by kernel table).
        let blocked = match blocked::choose(&graph) {
            Some(choice) if binding.is_empty() => {
                let (planned, plan) = plan_graph(&graph, Some(&choice))?;
                Some(BlockedPlan {
                    choice,
                    planned,
                    plan,
                })
            }
            _ => None,
        };
        let layout = layout::param_layout(&graph, blocked.as_ref().map(|b| &b.choice));
        match &params {
            Some(p) if *p != layout => {
                return Err(internal(
                    "the parameter layout differs between variants",
                    ir::print::print(&graph),
                ))
            }
            Some(_) => {}
            None => params = Some(layout),
        }
        variants.push(Variant {
            label: label(&source.symbols, &binding),
            binding,
            typed,
            graph,
            planned,
            plan,
            blocked,
        });
    }
    let Some(params) = params else {
        return Err(internal("no variant to compile", String::new()));
    };
    Ok(Compiled {
        source,
        variants,
        params,
        weights,
    })
}

/// Plans `graph` (NCHW, or with `blocked`'s values blocked) and verifies the plan: with free
/// concatenations when they make the arena no larger (ties: fewer copies).
fn plan_graph(
    graph: &ir::Graph,
    blocked: Option<&blocked::Blocked>,
) -> Result<(layout::Planned, plan::Plan), Failure> {
    let mut planned = layout::problem(graph, blocked);
    let mut plan = plan::plan(&planned.problem);
    if !planned.free.concats.is_empty() {
        let copying = layout::problem_copying(graph, blocked);
        let alt = plan::plan(&copying.problem);
        if alt.arena_bytes < plan.arena_bytes {
            (planned, plan) = (copying, alt);
        }
    }
    if let Err(msg) = verify::verify(&planned.problem, &plan) {
        return Err(Failure::Internal(internal_message(
            &msg,
            &plan.render(&planned.problem),
        )));
    }
    Ok((planned, plan))
}

/// The Rust code of a compiled network: its type, named and shaped as `sig` says.
pub fn generate(c: &Compiled, sig: &codegen::Signature) -> TokenStream {
    let plan_text = c.plan_text();
    let steps = prepare::steps(&c.variants[0].graph, &c.params);
    // Embedded weights are prepared now; if the prepared file cannot be written, the model
    // prepares them in `new()` instead (the `prepare` module says why that is only a fallback).
    let embedded = c
        .weights
        .as_ref()
        .and_then(|w| prepare::embed(w, &c.params, &steps, &sig.name.to_string()).ok());
    let variants: Vec<codegen::Model> = c
        .variants
        .iter()
        .map(|v| codegen::Model {
            sig,
            graph: &v.graph,
            plan: &v.plan,
            planned: &v.planned,
            plan_text: &plan_text,
            params: &c.params,
            weights: c.weights.as_ref(),
            steps: &steps,
            embedded: embedded.as_ref(),
            label: &v.label,
            blocked: None,
        })
        .collect();
    let blocked = match (&c.variants[..], &variants[..]) {
        ([v], [m]) => v.blocked.as_ref().map(|b| codegen::Model {
            plan: &b.plan,
            planned: &b.planned,
            blocked: Some(&b.choice),
            ..*m
        }),
        _ => None,
    };
    codegen::generate(&variants, blocked.as_ref())
}

/// The macro driver: compile and generate, or return the errors next to a fallback type.
pub fn expand(def: syntax::NetworkDef, base_dir: Option<PathBuf>) -> TokenStream {
    match compile(&def, base_dir) {
        Ok(c) => generate(&c, &codegen::Signature::of(&def)),
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(codegen::fallback(&def));
            out
        }
    }
}
