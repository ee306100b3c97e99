//! Code for the ops that make or read a run-time sequence (one whose length and element sizes
//! are decided at run time, `SeqVal::run`).
//!
//! Such a sequence is a grow-only buffer of the model (`__dynK`, like a data-dependent tensor's),
//! filled by the `__private::run_seq_*` functions: each op that makes one copies its elements
//! into its own buffer, so every sequence value stays readable after later ops, and nothing
//! in the arena is held by it. Positions and sizes are checked there (an `Err`, never a panic);
//! `at` and `concat_from_seq` define the run-time size variables (`__dK`) of their results'
//! `?` sizes for the ops after them.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::{rust_type, Loc, Model};
use crate::ir::{Op, OpKind, Pos, SeqSplit, ValueId};

impl Model<'_> {
    /// Whether `op` makes or reads a run-time sequence.
    pub(super) fn is_run_seq_op(&self, op: &Op) -> bool {
        let run = |v: ValueId| self.graph.seq(v).is_some_and(|s| s.run.is_some());
        op.results.first().is_some_and(|&r| run(r)) || op.args.first().is_some_and(|&a| run(a))
    }

    /// The buffer of a value that has one (a run-time sequence or a data-dependent tensor).
    fn buf(&self, v: ValueId) -> proc_macro2::Ident {
        format_ident!("__dyn{}", self.dyn_index(v))
    }

    pub(super) fn run_seq_op(&self, i: usize) -> TokenStream {
        let g = self.graph;
        let op = &g.ops[i];
        let out = op.result();
        let own = self.buf(out);
        let opt = |d: &Option<usize>| match d {
            Some(n) => quote! { ::core::option::Option::Some(#n) },
            None => quote! { ::core::option::Option::None },
        };
        // A position: `None` for the default, else the `i64` (checked at run time: the length
        // is not known before).
        let pos = |at: Pos, k: usize| match at {
            Pos::Default => quote! { ::core::option::Option::None },
            _ => {
                let p = self.position(at, op.args.get(k).copied(), 0);
                quote! { ::core::option::Option::Some(#p) }
            }
        };
        match &op.kind {
            OpKind::SeqInput {
                slot,
                name,
                dtype,
                dims,
            } => {
                let t = rust_type(*dtype);
                let ty = crate::ir::run_elem_text(*dtype, dims);
                let src = format_ident!("__s{}", slot);
                let dims = dims.iter().map(opt);
                quote! { ::kiln::__private::run_seq_input::<#t>(#own, #name, #ty, &[#(#dims),*], #src)?; }
            }
            OpKind::SplitToSeq {
                axis,
                split: SeqSplit::Run,
                ..
            } => {
                let x = op.args[0];
                let xs = g.shape(x);
                let t = rust_type(xs.dtype);
                let shape = &xs.dims;
                let a = *axis as usize;
                let mut reads = Vec::new();
                let xr = self.read(x, &mut reads);
                let sizes = self.any_read(op.args[1], &mut reads);
                let ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
                quote! {
                    {
                        let ([#(#ids),*], []) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], []);
                        ::kiln::__private::run_seq_split::<#t>(#own, #xr, &[#(#shape),*], #a, #sizes)?;
                    }
                }
            }
            OpKind::SeqInsert { at } => {
                let (src, x) = (self.buf(op.args[0]), op.args[1]);
                let xs = g.shape(x);
                let t = rust_type(xs.dtype);
                let mut reads = Vec::new();
                let xr = self.any_read(x, &mut reads);
                let shape = if xs.is_dynamic() {
                    let b = self.buf(x);
                    quote! { #b.shape() }
                } else {
                    let d = &xs.dims;
                    quote! { &[#(#d),*] }
                };
                let ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
                let p = pos(*at, 2);
                quote! {
                    {
                        let __p = #p;
                        let ([#(#ids),*], []) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], []);
                        ::kiln::__private::run_seq_insert::<#t>(#own, &*#src, #xr, #shape, __p)?;
                    }
                }
            }
            OpKind::SeqErase { at } => {
                let src = self.buf(op.args[0]);
                let t = rust_type(g.seq(op.args[0]).map_or(crate::ir::DType::F32, |s| s.dtype));
                let p = pos(*at, 1);
                quote! { ::kiln::__private::run_seq_erase::<#t>(#own, &*#src, #p)?; }
            }
            OpKind::SeqAt { at } => {
                let src = self.buf(op.args[0]);
                let ys = g.shape(out);
                let t = rust_type(ys.dtype);
                let p = self.position(*at, op.args.get(1).copied(), 0);
                let dims: Vec<TokenStream> = (0..ys.rank())
                    .map(|d| opt(&ys.run_dim(d).is_none().then_some(ys.dims[d])))
                    .collect();
                let vars: Vec<(usize, proc_macro2::Ident)> = (0..ys.rank())
                    .filter_map(|d| ys.run_dim(d).map(|k| (d, format_ident!("__d{}", k))))
                    .collect();
                let declare = vars.iter().map(|(_, v)| quote! { let #v: usize; });
                let define = vars.iter().map(|(d, v)| quote! { #v = __sh[#d]; });
                let write = if ys.is_dynamic() {
                    quote! { let out = #own.ensure::<#t>(__v.len(), __sh)?; }
                } else {
                    let Loc::Arena(o0, o1) = self.loc(out) else {
                        unreachable!("results of ops live in the arena")
                    };
                    let view = self.typed_mut(out, quote! { out });
                    quote! {
                        let ([], [out]) = ::kiln::__private::io(&mut *__arena, [], [#o0..#o1]);
                        #view
                    }
                };
                quote! {
                    #(#declare)*
                    {
                        let __p: i64 = #p;
                        let (__v, __sh) = ::kiln::__private::run_seq_at::<#t>(&*#src, __p, &[#(#dims),*])?;
                        #(#define)*
                        #write
                        out.copy_from_slice(__v);
                    }
                }
            }
            OpKind::SeqLen => {
                let src = self.buf(op.args[0]);
                let Loc::Arena(o0, o1) = self.loc(out) else {
                    unreachable!("results of ops live in the arena")
                };
                let view = self.typed_mut(out, quote! { out });
                quote! {
                    {
                        let ([], [out]) = ::kiln::__private::io(&mut *__arena, [], [#o0..#o1]);
                        #view
                        out[0] = #src.seq_len() as i64;
                    }
                }
            }
            OpKind::ConcatFromSeq { axis, new_axis } => {
                let src = self.buf(op.args[0]);
                let ys = g.shape(out);
                let t = rust_type(ys.dtype);
                let a = *axis as usize;
                let var = format_ident!(
                    "__d{}",
                    ys.run_dim(a)
                        .expect("the concatenated axis has a run-time size")
                );
                // The element shape: the result's, less the new axis (a joined axis's size is
                // ignored).
                let mut dims = ys.dims.clone();
                if *new_axis {
                    dims.remove(a);
                }
                quote! {
                    let #var: usize = ::kiln::__private::run_seq_concat::<#t>(#own, &*#src, #a, #new_axis, &[#(#dims),*])?;
                }
            }
            other => unreachable!("{} does not take a run-time sequence", other.name()),
        }
    }

    /// How an op reads `v`, static (as [`Model::read`]) or a data-dependent tensor (its
    /// buffer's values).
    fn any_read(&self, v: ValueId, reads: &mut Vec<TokenStream>) -> TokenStream {
        let s = self.graph.shape(v);
        if !s.is_dynamic() {
            return self.read(v, reads);
        }
        let root = self.buf(self.graph.alias_root(v));
        let t = rust_type(s.dtype);
        let len = self.product(v, 0..s.rank());
        quote! { #root.view::<#t>(#len) }
    }
}
