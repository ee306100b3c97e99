//! Procedural-macro entry points of kiln. Each is a few lines: parse, call kiln-dsl, return
//! tokens. All logic, and all of its tests, live in kiln-dsl.

use proc_macro::TokenStream;

/// Compiles a network description into a Rust type. See the kiln README for the DSL.
#[proc_macro]
pub fn network(input: TokenStream) -> TokenStream {
    // Weights files are resolved like `include_bytes!`: relative to the file that contains the
    // macro call. The span of the call site knows that file; a driver without one (unit tests)
    // falls back to the crate root.
    let base_dir = proc_macro::Span::call_site()
        .local_file()
        .and_then(|file| file.parent().map(|dir| dir.to_path_buf()));
    let input = syn::parse_macro_input!(input as kiln_dsl::syntax::NetworkDef);
    kiln_dsl::expand(input, base_dir).into()
}
