//! Code for the sequence ops.
//!
//! Most of them emit nothing: a sequence whose order is known at compile time exists only in
//! the compiler (its elements are planned tensors), and `at` with a static position is a view.
//! What runs is: the order array of a sequence built with run-time positions
//! (`__private::seq_insert`/`seq_erase`, a `[usize; len]` local, no allocation), `at` that
//! picks its element at run time (a `match` over the candidates, each arm one copy), `len`
//! (a constant stored), a `split_to_seq` whose pieces are not runs of its input (one copy into
//! the sequence's buffer) and `concat_from_seq` (one copy per element).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::{rust_type, Loc, Model};
use crate::ir::{DType, Elem, OpKind, Pos, SeqSplit, ValueId};
use crate::plan::ValuePlacement;

impl Model<'_> {
    pub(super) fn seq_op(&self, i: usize) -> TokenStream {
        let g = self.graph;
        let op = &g.ops[i];
        let k = quote! { ::kiln::__private::kernels };
        let Some(out) = op.results.first().copied() else {
            return TokenStream::new();
        };
        match &op.kind {
            OpKind::SeqInsert { at } | OpKind::SeqErase { at } => {
                let (Some(r), Some(s)) = (g.seq(out), g.seq(op.args[0])) else {
                    unreachable!("inference typed the sequences")
                };
                if !r.run_order {
                    return TokenStream::new();
                }
                let prev = self.order(op.args[0]);
                let q = order_ident(out);
                let n = r.len;
                if let OpKind::SeqInsert { .. } = op.kind {
                    let pos = self.position(*at, op.args.get(2).copied(), s.len as i64);
                    let cand = s.elems.len();
                    quote! { let #q: [usize; #n] = ::kiln::__private::seq_insert(&#prev, #cand, #pos)?; }
                } else {
                    let pos = self.position(*at, op.args.get(1).copied(), s.len as i64 - 1);
                    quote! { let #q: [usize; #n] = ::kiln::__private::seq_erase(&#prev, #pos)?; }
                }
            }
            OpKind::SeqAt { at } => {
                if g.seq_view(out).is_some() {
                    return TokenStream::new();
                }
                let Some(s) = g.seq(op.args[0]) else {
                    unreachable!("inference typed the sequence")
                };
                let pos = self.position(*at, op.args.get(1).copied(), 0);
                let order = self.order(op.args[0]);
                let len = s.len;
                let (o0, o1) = self.arena_range(out);
                let view = self.typed_mut(out, quote! { out });
                let arms = s.elems.iter().enumerate().map(|(j, e)| {
                    let mut reads = Vec::new();
                    let x = self.elem_read(e, &mut reads);
                    let ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
                    let pat = if j + 1 == s.elems.len() {
                        quote! { _ }
                    } else {
                        quote! { #j }
                    };
                    quote! {
                        #pat => {
                            let ([#(#ids),*], [out]) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], [#o0..#o1]);
                            #view
                            out.copy_from_slice(#x);
                        }
                    }
                });
                quote! {
                    {
                        let __c: usize = #order[::kiln::__private::seq_index("at", #len, #pos)?];
                        match __c { #(#arms)* }
                    }
                }
            }
            OpKind::SeqLen => {
                let Some(s) = g.seq(op.args[0]) else {
                    unreachable!("inference typed the sequence")
                };
                let len = s.len as i64;
                let (o0, o1) = self.arena_range(out);
                let view = self.typed_mut(out, quote! { out });
                quote! {
                    {
                        let ([], [out]) = ::kiln::__private::io(&mut *__arena, [], [#o0..#o1]);
                        #view
                        out[0] = #len;
                    }
                }
            }
            OpKind::SplitToSeq {
                axis,
                split: SeqSplit::Run,
                ..
            } => {
                // Only the length is used: check the sizes add up, as ONNX requires.
                let Some(s) = g.seq(out) else {
                    unreachable!("inference typed the sequence")
                };
                let n = s.len;
                let dim = g.shape(op.args[0]).dims[*axis as usize];
                let mut reads = Vec::new();
                let sizes = self.read(op.args[1], &mut reads);
                let ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
                quote! {
                    {
                        let ([#(#ids),*], []) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], []);
                        ::kiln::__private::split_sizes::<#n>(#sizes, #dim)?;
                    }
                }
            }
            OpKind::SplitToSeq { axis, .. } if g.split_copies(out) => {
                let Some(s) = g.seq(out) else {
                    unreachable!("inference typed the sequence")
                };
                let x_shape = g.shape(op.args[0]);
                let a = *axis as usize;
                let outer: usize = x_shape.dims[..a].iter().product();
                let inner: usize = x_shape.dims[a + 1..].iter().product();
                let total = x_shape.dims[a] * inner;
                let mut reads = Vec::new();
                let x = self.read(op.args[0], &mut reads);
                let ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
                let (o0, o1) = self.arena_range(out);
                let t = rust_type(s.dtype);
                let n = x_shape.elements();
                let view = if s.dtype == DType::F32 {
                    TokenStream::new()
                } else {
                    quote! { let out = ::kiln::__private::view_mut::<#t>(out, #n); }
                };
                let mut from = 0usize;
                let copies = s.elems.iter().map(|e| {
                    let part = e.shape.elements() / outer.max(1);
                    let (p0, p1) = (e.offset, e.offset + e.shape.elements());
                    let c = quote! { #k::copy_from_axis(#outer, #part, #total, #from, #x, &mut out[#p0..#p1]); };
                    from += part;
                    c
                });
                quote! {
                    {
                        let ([#(#ids),*], [out]) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], [#o0..#o1]);
                        #view
                        #(#copies)*
                    }
                }
            }
            OpKind::ConcatFromSeq { axis, new_axis } => {
                let Some(s) = g.seq(op.args[0]) else {
                    unreachable!("inference typed the sequence")
                };
                let y = g.shape(out);
                let a = *axis as usize;
                let outer: usize = y.dims[..a].iter().product();
                let inner: usize = y.dims[a + 1..].iter().product();
                let total = y.dims[a] * inner;
                let (o0, o1) = self.arena_range(out);
                let view = self.typed_mut(out, quote! { out });
                let mut reads = Vec::new();
                let mut offset = 0usize;
                let mut copies = Vec::new();
                for e in &s.elems {
                    let x = self.elem_read(e, &mut reads);
                    let along = if *new_axis { 1 } else { e.shape.dims[a] };
                    let part = along * inner;
                    copies.push(
                        quote! { #k::copy_into_axis(#outer, #part, #total, #offset, #x, out); },
                    );
                    offset += part;
                }
                let ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
                quote! {
                    {
                        let ([#(#ids),*], [out]) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], [#o0..#o1]);
                        #view
                        #(#copies)*
                    }
                }
            }
            // The rest exist only at compile time.
            _ => TokenStream::new(),
        }
    }

    /// A returned sequence: a `kiln::Seq` of its elements, borrowed from the arena (inference
    /// made each element a whole arena tensor).
    pub(super) fn seq_output(&self, v: ValueId) -> TokenStream {
        let Some(s) = self.graph.seq(v) else {
            unreachable!("only sequences come here")
        };
        let elems = s.elems.iter().map(|e| {
            let Loc::Arena(a, b) = self.loc(e.base) else {
                unreachable!("inference copies input-backed elements into the arena")
            };
            let data = self.typed(e.base, quote! { &__arena[#a..#b] });
            let dims = &e.shape.dims;
            quote! { ::kiln::__private::Tensor::new(#data, &[#(#dims),*]) }
        });
        quote! { ::kiln::__private::Seq::new([#(#elems),*]) }
    }

    /// The element offset of `v` in the value that owns its bytes (sequence views add up).
    pub(super) fn view_offset(&self, mut v: ValueId) -> usize {
        let mut at = 0;
        loop {
            if let Some(e) = self.graph.seq_view(v) {
                at += e.offset;
                v = e.base;
            } else if let Some(OpKind::View { offset, .. }) =
                self.graph.producer_op(v).map(|op| &op.kind)
            {
                at += offset;
                v = self.graph.op_args(v)[0];
            } else if self
                .graph
                .producer_op(v)
                .is_some_and(|op| op.kind.is_alias())
            {
                v = self.graph.op_args(v)[0];
            } else {
                return at;
            }
        }
    }

    /// The f32 range of a value planned in the arena (for a copying `split_to_seq`, its
    /// buffer of pieces).
    fn arena_range(&self, v: ValueId) -> (usize, usize) {
        match self.placement(v) {
            Some(ValuePlacement::Arena(p)) => (p.offset / 4, p.offset / 4 + p.bytes.div_ceil(4)),
            _ => unreachable!("the results of sequence ops that compute live in the arena"),
        }
    }

    /// A typed slice of element `e`, pushing the arena region it needs onto `reads`.
    fn elem_read(&self, e: &Elem, reads: &mut Vec<TokenStream>) -> TokenStream {
        let (off, len) = (e.offset, e.shape.elements());
        if self.graph.split_copies(e.base) {
            let (a0, a1) = self.arena_range(e.base);
            let id = format_ident!("r{}", reads.len());
            reads.push(quote! { #a0..#a1 });
            return self.typed_part(e.shape.dtype, quote! { #id }, a1 - a0, off, len);
        }
        match self.loc(e.base) {
            Loc::Input(n, part) => {
                let id = format_ident!("__x{}", n);
                let a = part.map_or(0, |p| p.0) + off;
                let b = a + len;
                quote! { &#id[#a..#b] }
            }
            Loc::Param(a0, _) => {
                let (a, b) = (a0 + off, a0 + off + len);
                quote! { &__params[#a..#b] }
            }
            Loc::Arena(a0, a1) => {
                let id = format_ident!("r{}", reads.len());
                reads.push(quote! { #a0..#a1 });
                self.typed_part(e.shape.dtype, quote! { #id }, a1 - a0, off, len)
            }
        }
    }

    /// Elements `off..off + len` of an f32 region of `slots` slots viewed as `dtype`.
    fn typed_part(
        &self,
        dtype: DType,
        region: TokenStream,
        slots: usize,
        off: usize,
        len: usize,
    ) -> TokenStream {
        let end = off + len;
        if dtype == DType::F32 {
            return quote! { &#region[#off..#end] };
        }
        let t = rust_type(dtype);
        let all = slots * 4 / dtype.size();
        quote! { &::kiln::__private::view::<#t>(#region, #all)[#off..#end] }
    }

    /// The order of sequence `s`: its run-time array, or `[0, 1, ...]`.
    fn order(&self, s: ValueId) -> TokenStream {
        match self.graph.seq(s) {
            Some(q) if q.run_order => {
                let id = order_ident(s);
                quote! { #id }
            }
            Some(q) if q.len == 0 => quote! { [0usize; 0] },
            Some(q) => {
                let idx = (0..q.len).map(proc_macro2::Literal::usize_suffixed);
                quote! { [#(#idx),*] }
            }
            None => unreachable!("inference typed the sequence"),
        }
    }

    /// A position as an `i64` expression: the default, a constant, or the scalar `v` holds.
    pub(super) fn position(&self, at: Pos, v: Option<ValueId>, default: i64) -> TokenStream {
        match (at, v) {
            (Pos::Static(i), _) => quote! { #i },
            (Pos::Run, Some(v)) => match self.loc(v) {
                Loc::Input(n, part) => {
                    let id = format_ident!("__x{}", n);
                    let a = part.map_or(0, |p| p.0);
                    quote! { #id[#a] }
                }
                Loc::Arena(a0, a1) => quote! {
                    {
                        let ([r0], []) = ::kiln::__private::io(&mut *__arena, [#a0..#a1], []);
                        ::kiln::__private::view::<i64>(r0, 1)[0]
                    }
                },
                Loc::Param(..) => unreachable!("inference checked the position is an i64"),
            },
            _ => quote! { #default },
        }
    }
}

fn order_ident(s: ValueId) -> proc_macro2::Ident {
    format_ident!("__q{}", s.0)
}
