//! kiln-dsl: the compiler behind `kiln::network!`.
//!
//! The pipeline ([`compile`]) is: parse ([`syntax`]) → lower and infer shapes ([`lower`]) →
//! check the weights file ([`weights`]) → fold and fuse ([`fuse`]) → plan memory ([`layout`],
//! [`plan`]) → verify the plan ([`verify`]) → generate Rust ([`codegen`]). User mistakes are
//! `syn::Error`s at the user's tokens, collected across the whole network; a plan the verifier
//! rejects is an internal error, reported as such with the plan attached.

pub mod codegen;
pub mod fuse;
pub mod ir;
pub mod layout;
pub mod lower;
pub mod plan;
pub mod safetensors;
pub mod syntax;
pub mod verify;
pub mod weights;

use std::path::PathBuf;

use proc_macro2::{Span, TokenStream};

/// Collected diagnostics: every error found before the pipeline had to stop.
#[derive(Debug, Default)]
pub struct Errors(Vec<syn::Error>);

impl Errors {
    pub fn push(&mut self, e: syn::Error) {
        self.0.push(e);
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// All errors as one `syn::Error`, or `None` if there were none.
    pub fn combined(self) -> Option<syn::Error> {
        self.0.into_iter().reduce(|mut a, b| {
            a.combine(b);
            a
        })
    }
}

/// Everything the compiler worked out about one network.
#[derive(Debug)]
pub struct Compiled {
    pub graph: ir::Graph,
    pub problem: plan::Problem,
    pub plan: plan::Plan,
    pub params: layout::ParamLayout,
    pub weights: Option<weights::WeightsFile>,
}

impl Compiled {
    /// The printed memory plan (what `Model::PLAN` holds).
    pub fn plan_text(&self) -> String {
        self.plan.render(&self.problem)
    }
}

/// Runs every pass. `base_dir` is where relative weights paths start (the directory of the
/// file containing the macro call); `None` means the crate root (`CARGO_MANIFEST_DIR`).
pub fn compile(
    def: &syntax::NetworkDef,
    base_dir: Option<PathBuf>,
) -> Result<Compiled, syn::Error> {
    let mut errors = Errors::default();
    let lowered = lower::lower(def, &mut errors);
    let base_dir = base_dir
        .or_else(|| std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from))
        .unwrap_or_default();
    let weights = match &lowered.weights_file {
        Some(lit) if errors.is_empty() => {
            weights::check(&lowered.graph, lit, &base_dir, &mut errors)
        }
        _ => None,
    };
    if let Some(e) = errors.combined() {
        return Err(e);
    }
    let graph = fuse::fuse(&lowered.graph);
    let problem = layout::problem(&graph);
    let plan = plan::plan(&problem);
    if let Err(msg) = verify::verify(&problem, &plan) {
        return Err(syn::Error::new(
            Span::call_site(),
            format!("kiln internal error (a compiler bug, not a mistake in the model; please report it): {msg}"),
        ));
    }
    let params = layout::param_layout(&graph);
    Ok(Compiled {
        graph,
        problem,
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
