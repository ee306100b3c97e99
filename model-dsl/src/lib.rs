//! kiln-dsl: the compiler behind `kiln::network!`.
//!
//! The pipeline ([`compile`]) is: parse ([`syntax`]) → build the graph ([`front::dsl`]) →
//! infer types and shapes ([`infer`]) → check the weights file ([`weights`]) → fold and fuse
//! ([`fuse`]) → plan memory ([`layout`], [`plan`]) → verify the plan ([`verify`]) → generate
//! Rust ([`codegen`]). The IR ([`ir`]) is checked by its verifier after inference and after
//! fusion. User mistakes are [`diag::Diag`]s at locations the front end renders (for the macro,
//! `syn::Error`s at the user's tokens), collected across the whole network; a broken invariant
//! is an internal error, reported as such with the IR or the plan attached.
//!
//! Modules only import modules below them in this list: `diag`, `contract` and `ir` at the
//! bottom; then `syntax`; the passes `infer`, `weights`, `fuse`, `layout`, `plan`, `verify`;
//! `front` and `codegen`; and this file, the driver, at the top.

pub mod codegen;
pub mod contract;
pub mod diag;
pub mod front;
pub mod fuse;
pub mod infer;
pub mod ir;
pub mod layout;
pub mod plan;
pub mod safetensors;
pub mod syntax;
pub mod verify;
pub mod weights;

use std::path::PathBuf;

use proc_macro2::{Span, TokenStream};

use crate::diag::Errors;

/// Everything the compiler worked out about one network.
#[derive(Debug)]
pub struct Compiled {
    /// The front end's graph, untyped.
    pub source: ir::Graph,
    /// The typed graph, before fusion.
    pub typed: ir::Graph,
    /// The graph the plan and the generated code are for (typed, fused).
    pub graph: ir::Graph,
    pub planned: layout::Planned,
    pub plan: plan::Plan,
    pub params: layout::ParamLayout,
    pub weights: Option<weights::WeightsFile>,
}

impl Compiled {
    /// The printed memory plan (what `Model::PLAN` holds).
    pub fn plan_text(&self) -> String {
        self.plan.render(&self.planned.problem)
    }
}

fn internal_error(what: &str, detail: &str) -> syn::Error {
    syn::Error::new(
        Span::call_site(),
        format!("kiln internal error (a compiler bug, not a mistake in the model; please report it): {what}\n{detail}"),
    )
}

/// Runs every pass. `base_dir` is where relative weights paths start (the directory of the
/// file containing the macro call); `None` means the crate root (`CARGO_MANIFEST_DIR`).
pub fn compile(
    def: &syntax::NetworkDef,
    base_dir: Option<PathBuf>,
) -> Result<Compiled, syn::Error> {
    let mut errors = Errors::default();
    let mut lowered = front::dsl::lower(def, &mut errors);
    let source = lowered.graph;
    let typed = infer::infer(&source, &mut errors);
    let base_dir = base_dir
        .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from))
        .unwrap_or_default();
    let weights = match (&lowered.weights_file, &typed) {
        (Some(lit), Some(typed)) if errors.is_empty() => {
            let at = lowered.spans.at(lit.span());
            weights::check(typed, &lit.value(), at, &base_dir, &mut errors)
        }
        _ => None,
    };
    if let Some(e) = lowered.spans.render_all(&errors) {
        return Err(e);
    }
    let typed = typed.expect("inference reports an error whenever it returns no graph");
    if let Err(msg) = ir::verify::verify(&typed) {
        return Err(internal_error(
            &format!("the typed IR is malformed: {msg}"),
            &ir::print::print(&typed),
        ));
    }
    let graph = fuse::fuse(&typed);
    if let Err(msg) = ir::verify::verify(&graph) {
        return Err(internal_error(
            &format!("fusion broke the IR: {msg}"),
            &ir::print::print(&graph),
        ));
    }
    let planned = layout::problem(&graph);
    let plan = plan::plan(&planned.problem);
    if let Err(msg) = verify::verify(&planned.problem, &plan) {
        return Err(internal_error(&msg, &plan.render(&planned.problem)));
    }
    let params = layout::param_layout(&graph);
    Ok(Compiled {
        source,
        typed,
        graph,
        planned,
        plan,
        params,
        weights,
    })
}

/// The macro driver: compile and generate, or return the errors next to a fallback type.
pub fn expand(def: syntax::NetworkDef, base_dir: Option<PathBuf>) -> TokenStream {
    match compile(&def, base_dir) {
        Ok(c) => {
            let plan_text = c.plan_text();
            codegen::Model {
                def: &def,
                graph: &c.graph,
                plan: &c.plan,
                planned: &c.planned,
                plan_text: &plan_text,
                params: &c.params,
                weights: c.weights.as_ref(),
            }
            .generate()
        }
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(codegen::fallback(&def));
            out
        }
    }
}
