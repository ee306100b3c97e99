//! Code generation: the checked graph and its memory plan become a Rust type whose `run` is a
//! straight line of kernel calls with every shape, offset and kernel choice a constant.
//!
//! Generated code names only `::kiln::__private::*`. Facts the planner proved are restated as
//! `const` assertions where the compiler can check them (scratch sizes against the kernels'
//! own formula, the embedded file's length against the header that was checked).

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use crate::blocked::Blocked;
use crate::ir::{
    as_2d, as_3d, pad_2d, pad_3d, Act, BinOp, Graph, OpKind, PoolKind, Producer, Shape, ValueId,
};
use crate::layout::{self, table_binary, ParamLayout, Planned};
use crate::plan::{Plan, ValuePlacement};
use crate::prepare::{self, range, ConvWeights, Embedded, Step};
use crate::syntax::NetworkDef;
use crate::weights::WeightsFile;

mod runseq;
mod seq;

/// What the generated type is called and how it looks from outside: every front end gives one
/// (the DSL from the `net` line, a model file from its name and inputs).
#[derive(Debug)]
pub struct Signature {
    pub attrs: Vec<syn::Attribute>,
    pub vis: syn::Visibility,
    pub name: syn::Ident,
    /// The parameters of `run`, in order.
    pub inputs: Vec<Param>,
}

/// One parameter of `run`: a tensor (one graph input) or, with `seq_len = Some(n)`, a
/// `kiln::Seq` of `n` tensors (`n` consecutive graph inputs), or with `run_seq`, a sequence
/// of any length (`kiln::AsSeq`, no graph input: an `OpKind::SeqInput` reads it).
#[derive(Debug)]
pub struct Param {
    pub name: syn::Ident,
    pub seq_len: Option<usize>,
    pub run_seq: bool,
}

impl Param {
    pub fn tensor(name: syn::Ident) -> Param {
        Param {
            name,
            seq_len: None,
            run_seq: false,
        }
    }
}

impl Signature {
    pub fn of(def: &NetworkDef) -> Signature {
        Signature {
            attrs: def.attrs.clone(),
            vis: def.vis.clone(),
            name: def.name.clone(),
            inputs: def
                .inputs
                .iter()
                .map(|i| Param {
                    name: i.name.clone(),
                    seq_len: i.ty.seq_len.filter(|_| i.ty.seq).map(|n| n.value),
                    run_seq: i.ty.seq && i.ty.seq_len.is_none(),
                })
                .collect(),
        }
    }
}

#[derive(Debug)]
pub struct Model<'a> {
    pub sig: &'a Signature,
    pub graph: &'a Graph,
    pub plan: &'a Plan,
    pub planned: &'a Planned,
    pub plan_text: &'a str,
    pub params: &'a ParamLayout,
    pub weights: Option<&'a WeightsFile>,
    /// How the parameter buffer is prepared (the same for every variant).
    pub steps: &'a [Step],
    /// The buffer prepared at compile time, if the weights are embedded and it was written.
    pub embedded: Option<&'a Embedded>,
    /// The variant's binding (`h = 224, w = 224`), empty for a network without size symbols.
    pub label: &'a str,
    /// For the blocked plan of a variant: which convolutions run blocked and which values are
    /// stored NCHW16c (`plan` and `planned` are then that plan's).
    pub blocked: Option<&'a Blocked>,
}

/// Where a value's data is when an op reads it.
enum Loc {
    /// The `i`th model input (or a view of it); with an element range when the value is a
    /// sequence element that is only part of it.
    Input(usize, Option<(usize, usize)>),
    /// f32 range in the arena.
    Arena(usize, usize),
    /// f32 range in the parameter buffer (a parameter used as a tensor).
    Param(usize, usize),
}

impl Model<'_> {
    fn placement(&self, v: ValueId) -> Option<&ValuePlacement> {
        self.planned.slot[v.index()].map(|s| &self.plan.values[s])
    }

    fn loc(&self, v: ValueId) -> Loc {
        let root = self.graph.alias_root(v);
        let at = self.view_offset(v);
        let len = self.graph.shape(v).elements();
        match self.graph.values[root.index()].producer {
            Producer::Input(i) => {
                let whole = at == 0 && self.graph.shape(root).elements() == len;
                return Loc::Input(i, (!whole).then_some((at, at + len)));
            }
            Producer::Param(p) => {
                let s = self.params.param(p);
                return Loc::Param(s.start + at, s.start + at + len);
            }
            Producer::Op { .. } => {}
        }
        match self.placement(v) {
            Some(ValuePlacement::Arena(p)) => {
                // Regions are counted in f32 slots; other dtypes are views of them.
                let len = match self.blocked.and_then(|b| b.stored_len(self.graph, v)) {
                    Some(len) => len,
                    None => self.graph.shape(v).bytes().div_ceil(4),
                };
                Loc::Arena(p.offset / 4, p.offset / 4 + len)
            }
            _ => unreachable!("the verifier checked that only inputs and parameters are external"),
        }
    }

    fn root(&self, v: ValueId) -> Option<usize> {
        match self.placement(v) {
            Some(ValuePlacement::Arena(p)) => p.root,
            _ => None,
        }
    }

    /// The parameter-buffer range of an argument that is a parameter.
    fn param_value(&self, v: ValueId) -> TokenStream {
        let slot = self
            .params
            .of_value(self.graph, v)
            .expect("the IR verifier checked that weights are parameters");
        let r = range(slot);
        quote! { &__params[#r] }
    }

    /// `const` assertions that each conv's planned scratch covers what its kernel asks for.
    fn scratch_asserts(&self) -> TokenStream {
        let mut out = TokenStream::new();
        for (i, op) in self.graph.ops.iter().enumerate() {
            if let Some(b) = self.blocked.filter(|b| b.convs[i]) {
                // A blocked Winograd convolution's own scratch follows its conversions'.
                if b.winograd(self.graph, i) {
                    let geom = self.conv_geom(i);
                    let planned =
                        self.planned.scratch[i].map_or(0, |k| self.plan.scratch[k].bytes / 4);
                    let parts: usize = b.scratch_parts(self.graph, i).iter().sum();
                    out.extend(quote! {
                        const _: () = ::core::assert!(
                            #planned >= #parts + ::kiln::__private::kernels::nchwc::winograd::scratch_len(&#geom)
                        );
                    });
                }
                continue;
            }
            if let OpKind::Conv { .. } | OpKind::ConvTranspose { .. } = op.kind {
                let geom = self.conv_geom(i);
                let planned = self.planned.scratch[i].map_or(0, |k| self.plan.scratch[k].bytes / 4);
                let len = if self.params.winograd[i].is_some() {
                    quote! { winograd_scratch_len }
                } else {
                    quote! { scratch_len }
                };
                out.extend(quote! { const _: () = ::core::assert!(#planned >= #geom.#len()); });
                if layout::few_tiles(self.graph, op) {
                    // It may run through im2col too.
                    out.extend(
                        quote! { const _: () = ::core::assert!(#planned >= #geom.scratch_len()); },
                    );
                }
            }
        }
        out
    }

    /// The kernel geometry of conv op `i`: a `Conv2d` (a 1-D convolution is a 2-D one of
    /// height 1, so every ISA's 2-D kernel runs it) or a `Conv3d`; a `ConvTranspose` (always
    /// 3-D, lower ranks with leading sizes of 1) for a transposed one.
    fn conv_geom(&self, i: usize) -> TokenStream {
        let op = &self.graph.ops[i];
        if let OpKind::ConvTranspose {
            kernel,
            stride,
            dilation,
            pad,
            groups,
            ..
        } = &op.kind
        {
            let x = self.graph.shape(op.args[0]);
            let y = self.graph.shape(op.result());
            let (n, c_in, c_out) = (x.batch(), x.channels(), y.channels());
            let input = as_3d(x.spatial_dims(), 1);
            let out = as_3d(y.spatial_dims(), 1);
            let [kernel, stride, dilation] = [kernel, stride, dilation].map(|v| as_3d(v, 1));
            let pad = pad_3d(pad.resolved());
            return quote! {
                ::kiln::__private::kernels::ConvTranspose {
                    batch: #n, c_in: #c_in, c_out: #c_out, groups: #groups,
                    input: [#(#input),*], k: [#(#kernel),*], stride: [#(#stride),*],
                    dilation: [#(#dilation),*], pad: [#(#pad),*], out: [#(#out),*],
                }
            };
        }
        let OpKind::Conv {
            kernel,
            stride,
            dilation,
            pad,
            groups,
            ..
        } = &op.kind
        else {
            unreachable!()
        };
        let x = self.graph.shape(op.args[0]);
        let y = self.graph.shape(op.result());
        let (n, c_in, c_out) = (x.batch(), x.channels(), y.channels());
        if kernel.len() == 3 {
            let ([d, h, w], out) = (three(x.spatial_dims()), three(y.spatial_dims()));
            let pad = pad.resolved();
            return quote! {
                ::kiln::__private::kernels::Conv3d {
                    batch: #n, c_in: #c_in, d: #d, h: #h, w: #w, c_out: #c_out,
                    k: [#(#kernel),*], stride: [#(#stride),*], dilation: [#(#dilation),*],
                    pad: [#(#pad),*], groups: #groups, out: [#(#out),*],
                }
            };
        }
        let [h, w] = as_2d(x.spatial_dims(), 1);
        let [oh, ow] = as_2d(y.spatial_dims(), 1);
        let [kh, kw] = as_2d(kernel, 1);
        let [sh, sw] = as_2d(stride, 1);
        let [dh, dw] = as_2d(dilation, 1);
        let [pt, pl, pb, pr] = pad_2d(pad.resolved());
        quote! {
            ::kiln::__private::kernels::Conv2d {
                batch: #n, c_in: #c_in, h: #h, w: #w, c_out: #c_out, kh: #kh, kw: #kw,
                stride: [#sh, #sw], dilation: [#dh, #dw], pad: [#pt, #pl, #pb, #pr],
                groups: #groups, out_h: #oh, out_w: #ow,
            }
        }
    }

    /// A blocked convolution (`conv2d_nchwc`): operands stored NCHW are converted through the
    /// op's scratch (`Blocked::scratch_parts`: input, residual, result), the blocked ones are
    /// read and written in place.
    fn blocked_conv(
        &self,
        i: usize,
        has_bias: bool,
        act: Act,
        read_args: &[TokenStream],
    ) -> TokenStream {
        let b = self
            .blocked
            .expect("only the blocked plan has blocked convolutions");
        let op = &self.graph.ops[i];
        let geom = self.conv_geom(i);
        let w = range(self.params.nchwc[i].expect("layout packs blocked convolutions' weights"));
        let bias = self.bias(i, op, has_bias);
        let act = act_tokens(act);
        let [x_len, r_len, y_len] = b.scratch_parts(self.graph, i);
        let winograd = b.winograd(self.graph, i);
        let data = op.data_args();
        let dims = |v: ValueId| {
            let s = self.graph.shape(v);
            let [h, w] = as_2d(s.spatial_dims(), 1);
            let (n, c) = (s.batch(), s.channels());
            quote! { #n, #c, #h, #w }
        };
        // The op has scratch (`scratch`) only if something is converted or it runs Winograd
        // (whose own scratch follows the conversions').
        let mut code = if x_len + r_len + y_len > 0 || winograd {
            quote! { let __rest: &mut [f32] = scratch; }
        } else {
            TokenStream::new()
        };
        let x = &read_args[0];
        let x = if x_len > 0 {
            let d = dims(data[0]);
            code.extend(quote! {
                let (__xb, __rest) = __rest.split_at_mut(#x_len);
                (__k.to_blocked)(#d, #x, __xb);
            });
            quote! { &*__xb }
        } else {
            x.clone()
        };
        let r = match read_args.get(1) {
            Some(r) if r_len > 0 => {
                let d = dims(data[1]);
                code.extend(quote! {
                    let (__rb, __rest) = __rest.split_at_mut(#r_len);
                    (__k.to_blocked)(#d, #r, __rb);
                });
                quote! { ::core::option::Option::Some(&*__rb) }
            }
            Some(r) => quote! { ::core::option::Option::Some(#r) },
            None => quote! { ::core::option::Option::None },
        };
        let conv = |y: TokenStream| {
            if winograd {
                quote! {
                    __k.conv2d_nchwc_winograd_on(
                        __par, &#geom, #x, &__params[#w], #bias, #r, #act, __rest, #y,
                    );
                }
            } else {
                quote! {
                    __k.conv2d_nchwc_on(__par, &#geom, #x, &__params[#w], #bias, #r, #act, #y);
                }
            }
        };
        if y_len > 0 {
            let d = dims(op.result());
            let conv = conv(quote! { __yb });
            code.extend(quote! {
                let (__yb, __rest) = __rest.split_at_mut(#y_len);
                #conv
                (__k.from_blocked)(#d, __yb, out);
            });
        } else {
            code.extend(conv(quote! { out }));
        }
        code
    }

    /// An op's code between the profiling hooks (`kiln::profile`, empty inline functions
    /// without the `profile` feature), labelled with [`Model::op_label`].
    fn profiled(&self, i: usize, body: TokenStream) -> TokenStream {
        if body.is_empty() {
            return body;
        }
        let label = self.op_label(i);
        quote! {
            let __prof = ::kiln::__private::profile_start();
            #body
            ::kiln::__private::profile_stop(__prof, #label);
        }
    }

    /// How `kiln::profile` names op `i`: its result's name, kind, input and output types and,
    /// for a convolution, the algorithm the compiler chose (`h: conv2d f32[1,64,56,56] ->
    /// f32[1,192,56,56] (winograd F(4x4,3x3))`).
    fn op_label(&self, i: usize) -> String {
        let op = &self.graph.ops[i];
        let r = op.result();
        let name = match &self.graph.values[r.index()].name {
            Some(n) => n.clone(),
            None => format!("%{}", r.index()),
        };
        let ty = |v: ValueId| match self.graph.seq(v) {
            Some(s) => s.type_text(),
            None => self.graph.shape(v).to_string(),
        };
        let mut label = format!("{name}: {}", op.kind.name());
        if let Some(&x) = op.data_args().first() {
            label += &format!(" {}", ty(x));
        }
        label += &format!(" -> {}", ty(r));
        if let Some(b) = self.blocked.filter(|b| b.convs[i]) {
            label += if b.winograd(self.graph, i) {
                " (winograd F(4x4,3x3), NCHW16c)"
            } else {
                " (direct, NCHW16c)"
            };
        } else if let Some(algo) = crate::layout::conv_algo(self.graph, op) {
            let either = if layout::few_tiles(self.graph, op) {
                " or im2col + gemm, by CPU"
            } else {
                ""
            };
            label += &format!(" ({}{either})", algo.describe());
        }
        label
    }

    /// One op: split the arena into what it reads and writes, then call its kernel.
    fn op(&self, i: usize) -> TokenStream {
        let op = &self.graph.ops[i];
        if op.kind.is_seq() && self.is_run_seq_op(op) {
            return self.run_seq_op(i);
        }
        let dynamic = matches!(
            op.kind,
            OpKind::SliceDyn { .. } | OpKind::NonZero | OpKind::Range | OpKind::SplitDyn { .. }
        ) || self.graph.shape(op.result()).is_dynamic()
            || op.args.iter().any(|a| self.graph.shape(*a).is_dynamic());
        if dynamic {
            return self.dyn_op(i);
        }
        if op.kind.is_alias()
            || matches!(op.kind, OpKind::View { .. })
            || self.planned.free.concats.contains(&op.result())
        {
            return TokenStream::new();
        }
        if op.kind.is_seq() {
            return self.seq_op(i);
        }
        // Results without elements (zero-size tensors): nothing to compute. Inference refused
        // every op that would compute elements from an empty input.
        if op
            .results
            .iter()
            .all(|&r| self.graph.shape(r).elements() == 0)
        {
            return TokenStream::new();
        }
        if let OpKind::Split { axis, sizes } = &op.kind {
            return self.split(op, *axis as usize, sizes);
        }
        let k = quote! { ::kiln::__private::kernels };
        let Loc::Arena(o0, o1) = self.loc(op.result()) else {
            unreachable!("only reshapes of inputs are external")
        };
        // The data arguments, read from the arena or an input; the others are parameters.
        let data = op.data_args();
        // The input (if any) whose bytes the result took over.
        let in_place = data
            .iter()
            .position(|a| self.root(*a).is_some() && self.root(*a) == self.root(op.result()));
        let mut reads = Vec::new();
        let mut read_args = Vec::new();
        for (j, a) in data.iter().enumerate() {
            if Some(j) == in_place {
                read_args.push(quote! { out });
                continue;
            }
            read_args.push(self.read(*a, &mut reads));
        }
        let read_ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
        // A result of another dtype than f32 is a view of its f32 slots.
        let out_view = self.typed_mut(op.result(), quote! { out });
        let mut writes = vec![quote! { #o0..#o1 }];
        let mut write_ids = vec![format_ident!("out")];
        let scratch_len = layout::op_scratch_len(self.graph, self.blocked, i);
        if let Some(idx) = self.planned.scratch[i] {
            let p = &self.plan.scratch[idx];
            let (s0, s1) = (p.offset / 4, p.offset / 4 + scratch_len);
            writes.push(quote! { #s0..#s1 });
            write_ids.push(format_ident!("scratch"));
        }
        // A constant has no argument: its "input" is its own (scalar) shape.
        let x_shape = self
            .graph
            .shape(op.args.first().copied().unwrap_or(op.result()));
        let y_shape = self.graph.shape(op.result());
        let call = match &op.kind {
            OpKind::Conv { has_bias, act, .. } if self.blocked.is_some_and(|b| b.convs[i]) => {
                self.blocked_conv(i, *has_bias, *act, &read_args)
            }
            OpKind::Conv {
                has_bias,
                act,
                kernel,
                residual,
                ..
            } => {
                let geom = self.conv_geom(i);
                let w = self.param_value(op.args[1]);
                let b = self.bias(i, op, *has_bias);
                let act = act_tokens(*act);
                let x = &read_args[0];
                let scratch = if scratch_len > 0 {
                    quote! { scratch }
                } else {
                    quote! { &mut [] }
                };
                // A 2-D convolution through the GEMM (im2col or none): the table's, on its
                // packed weights, unless the weights are shared with a reader that needs
                // another layout (then they are as given, for the portable kernel).
                let gemm = if prepare::conv_weights(self.graph, i) == ConvWeights::Portable {
                    quote! { #k::conv2d(&#geom, #x, #w, #b, #act, #scratch, out); }
                } else {
                    quote! { __k.conv2d_on(__par, &#geom, #x, #w, #b, #act, #scratch, out); }
                };
                if *residual {
                    // `fuse` gives a residual only to 2-D GEMM convolutions (no Winograd slot,
                    // no conv3d); its data arguments are the input, then the residual.
                    let r = &read_args[1];
                    if prepare::conv_weights(self.graph, i) == ConvWeights::Portable {
                        quote! { #k::conv2d_res(&#geom, #x, #w, #b, #r, #act, #scratch, out); }
                    } else {
                        quote! { __k.conv2d_res_on(__par, &#geom, #x, #w, #b, #r, #act, #scratch, out); }
                    }
                } else if let Some(u) = self.params.winograd[i] {
                    let u = range(u);
                    let winograd = quote! { __k.conv2d_winograd_on(__par, &#geom, #x, &__params[#u], #b, #act, #scratch, out); };
                    if layout::few_tiles(self.graph, op) {
                        // Both preparations are in the parameters (`contract::few_tiles`): the
                        // weights packed for the GEMM beside the transformed filters.
                        quote! {
                            if __k.few_tiles_winograd {
                                #winograd
                            } else {
                                #gemm
                            }
                        }
                    } else {
                        winograd
                    }
                } else if kernel.len() == 3 {
                    quote! { #k::conv3d(&#geom, #x, #w, #b, #act, #scratch, out, __k.gemm); }
                } else {
                    gemm
                }
            }
            OpKind::ConvTranspose { has_bias, .. } => {
                let geom = self.conv_geom(i);
                let w = self.param_value(op.args[1]);
                let b = self.bias(i, op, *has_bias);
                let x = &read_args[0];
                quote! { #k::conv_transpose(&#geom, #x, #w, #b, scratch, out, __k.gemm); }
            }
            OpKind::Dense { has_bias, act, .. } => {
                let (n, n_in, n_out) = (x_shape.batch(), x_shape.channels(), y_shape.channels());
                let w = self.param_value(op.args[1]);
                let b = self.bias(i, op, *has_bias);
                let act = act_tokens(*act);
                let x = &read_args[0];
                quote! { __k.dense_on(__par, #n, #n_in, #n_out, #x, #w, #b, #act, out); }
            }
            OpKind::BatchNorm { act, .. } => {
                let (scale, shift) =
                    self.params.scale_shift[i].expect("layout gives batch norms scale and shift");
                let (scale, shift) = (range(scale), range(shift));
                let (n, c) = (x_shape.batch(), x_shape.channels());
                let sp: usize = x_shape.spatial_dims().iter().product();
                let act = act_tokens(*act);
                if in_place.is_some() {
                    quote! { __k.scale_shift_inplace_on(__par, #n, #c, #sp, out, &__params[#scale], &__params[#shift], #act); }
                } else {
                    let x = &read_args[0];
                    quote! { __k.scale_shift_on(__par, #n, #c, #sp, #x, &__params[#scale], &__params[#shift], #act, out); }
                }
            }
            OpKind::Unary(act) => {
                let act = act_tokens(*act);
                if in_place.is_some() {
                    quote! { __k.unary_inplace_on(__par, #act, out); }
                } else {
                    let x = &read_args[0];
                    quote! { __k.unary_on(__par, #act, #x, out); }
                }
            }
            // Layout never computes these in place (see `layout::elementwise_args`).
            OpKind::Binary(bop) if !table_binary(y_shape) => {
                let bop = format_ident!("{}", format!("{bop:?}"));
                let geom = self.binary_nd_geom(op);
                let (a, b) = (&read_args[0], &read_args[1]);
                quote! { #k::binary_nd(#k::BinaryOp::#bop, &#geom, #a, #b, out); }
            }
            OpKind::Binary(bop) => {
                let bc = broadcast_tokens(
                    self.graph.shape(op.args[0]),
                    self.graph.shape(op.args[1]),
                    y_shape,
                );
                let bop = match bop {
                    BinOp::Add => quote! { #k::BinaryOp::Add },
                    BinOp::Sub => quote! { #k::BinaryOp::Sub },
                    BinOp::Mul => quote! { #k::BinaryOp::Mul },
                    BinOp::Div => quote! { #k::BinaryOp::Div },
                };
                match in_place {
                    Some(j) => {
                        let other = &read_args[1 - j];
                        let lhs = j == 0;
                        quote! { __k.binary_inplace_on(__par, #bop, &#bc, out, #other, #lhs); }
                    }
                    None => {
                        let (a, b) = (&read_args[0], &read_args[1]);
                        quote! { __k.binary_on(__par, #bop, &#bc, #a, #b, out); }
                    }
                }
            }
            // 3-D pools, and dilated ones of any rank (rare, so the table's 2-D kernels have no
            // dilation) as 3-D ones with leading sizes of 1.
            OpKind::Pool {
                kind,
                kernel,
                stride,
                dilation,
                pad,
                count_include_pad,
            } if kernel.len() == 3 || dilation.iter().any(|&d| d != 1) => {
                let (n, c) = (x_shape.batch(), x_shape.channels());
                let [d, h, w] = as_3d(x_shape.spatial_dims(), 1);
                let out = as_3d(y_shape.spatial_dims(), 1);
                let [kernel, stride, dilation] = [kernel, stride, dilation].map(|v| as_3d(v, 1));
                let pad = pad_3d(pad.resolved());
                let f = match kind {
                    PoolKind::Max => quote! { #k::max_pool3d },
                    PoolKind::Avg => quote! { #k::avg_pool3d },
                };
                let x = &read_args[0];
                quote! {
                    #f(&#k::Pool3d {
                        batch: #n, channels: #c, d: #d, h: #h, w: #w, k: [#(#kernel),*],
                        stride: [#(#stride),*], dilation: [#(#dilation),*], pad: [#(#pad),*],
                        out: [#(#out),*], count_include_pad: #count_include_pad,
                    }, #x, out);
                }
            }
            // 1-D pools run as 2-D ones of height 1.
            OpKind::Pool {
                kind,
                kernel,
                stride,
                pad,
                count_include_pad,
                ..
            } => {
                let (n, c) = (x_shape.batch(), x_shape.channels());
                let [h, w] = as_2d(x_shape.spatial_dims(), 1);
                let [oh, ow] = as_2d(y_shape.spatial_dims(), 1);
                let [kh, kw] = as_2d(kernel, 1);
                let [sh, sw] = as_2d(stride, 1);
                let [pt, pl, pb, pr] = pad_2d(pad.resolved());
                let f = match kind {
                    PoolKind::Max => quote! { __k.max_pool2d_on },
                    PoolKind::Avg => quote! { __k.avg_pool2d_on },
                };
                let x = &read_args[0];
                quote! {
                    #f(__par, &#k::Pool2d {
                        batch: #n, channels: #c, h: #h, w: #w, kh: #kh, kw: #kw,
                        stride: [#sh, #sw], pad: [#pt, #pl, #pb, #pr], out_h: #oh, out_w: #ow,
                        count_include_pad: #count_include_pad,
                    }, #x, out);
                }
            }
            OpKind::GlobalAvgPool => {
                let (n, c) = (x_shape.batch(), x_shape.channels());
                let sp: usize = x_shape.spatial_dims().iter().product();
                let x = &read_args[0];
                quote! { __k.global_avg_pool_on(__par, #n, #c, #sp, #x, out); }
            }
            OpKind::Concat { axis }
                if *axis != 1 || y_shape.rank() != 4 || y_shape.dtype != crate::ir::DType::F32 =>
            {
                let a = *axis as usize;
                let outer: usize = y_shape.dims[..a].iter().product();
                let inner: usize = y_shape.dims[a + 1..].iter().product();
                let total = y_shape.dims[a] * inner;
                let mut offset = 0usize;
                let copies = op.args.iter().zip(&read_args).map(|(v, x)| {
                    let part = self.graph.shape(*v).dims[a] * inner;
                    // An empty part (a zero-size tensor) copies nothing.
                    let t = (part > 0).then(
                        || quote! { #k::copy_into_axis(#outer, #part, #total, #offset, #x, out); },
                    );
                    offset += part;
                    t
                });
                quote! { #(#copies)* }
            }
            OpKind::Concat { .. } => {
                let (n, [h, w]) = (y_shape.batch(), y_shape.spatial());
                let sp = h * w;
                let c_dst = y_shape.channels();
                let mut offset = 0usize;
                let copies = op.args.iter().zip(&read_args).map(|(a, x)| {
                    let c = self.graph.shape(*a).channels();
                    let t = (c > 0).then(
                        || quote! { __k.copy_into_channels_on(__par, #n, #c, #sp, #x, #c_dst, #offset, out); },
                    );
                    offset += c;
                    t
                });
                quote! { #(#copies)* }
            }
            OpKind::Softmax { axis, log } => {
                let a = axis.expect("inference resolves the axis") as usize;
                let outer: usize = x_shape.dims[..a].iter().product();
                let len = x_shape.dims[a];
                let inner: usize = x_shape.dims[a + 1..].iter().product();
                match (log, in_place.is_some()) {
                    (false, true) => quote! { (__k.softmax_inplace)(#outer, #len, #inner, out); },
                    (false, false) => {
                        let x = &read_args[0];
                        quote! { (__k.softmax)(#outer, #len, #inner, #x, out); }
                    }
                    (true, true) => quote! { #k::log_softmax_inplace(#outer, #len, #inner, out); },
                    (true, false) => {
                        let x = &read_args[0];
                        quote! { #k::log_softmax(#outer, #len, #inner, #x, out); }
                    }
                }
            }
            OpKind::Transpose { perm } => {
                let dims = &x_shape.dims;
                let x = &read_args[0];
                quote! { #k::transpose(&#k::Transpose { shape: &[#(#dims),*], perm: &[#(#perm),*] }, #x, out); }
            }
            OpKind::MatMul => {
                let (a, b) = (self.graph.shape(op.args[0]), self.graph.shape(op.args[1]));
                let r = y_shape.rank();
                let batch = &y_shape.dims[..r - 2];
                let (m, kk, n) = (
                    a.dims[a.rank() - 2],
                    a.dims[a.rank() - 1],
                    b.dims[b.rank() - 1],
                );
                let strides = |s: &Shape| {
                    broadcast_strides(
                        &s.dims[..s.rank() - 2],
                        batch,
                        s.dims[s.rank() - 2] * s.dims[s.rank() - 1],
                    )
                };
                let (sa, sb) = (strides(a), strides(b));
                let (xa, xb) = (&read_args[0], &read_args[1]);
                let geom = quote! { &#k::MatMul { batch: &[#(#batch),*], a_strides: &[#(#sa),*], b_strides: &[#(#sb),*], m: #m, k: #kk, n: #n } };
                if y_shape.dtype == crate::ir::DType::F64 {
                    quote! { #k::matmul_f64(#geom, #xa, #xb, out); }
                } else {
                    quote! { #k::matmul(#geom, #xa, #xb, out, __k.gemm); }
                }
            }
            OpKind::Reduce { kind, axes, .. } => {
                // Inference checked that the axes larger than 1 are one adjacent block.
                let big: Vec<usize> = axes
                    .iter()
                    .map(|&a| a as usize)
                    .filter(|&a| x_shape.dims[a] != 1)
                    .collect();
                let (first, last) = match (big.first(), big.last()) {
                    (Some(&f), Some(&l)) => (f, l),
                    _ => (0, 0),
                };
                let (outer, len, inner): (usize, usize, usize) = if big.is_empty() {
                    (x_shape.elements(), 1, 1)
                } else {
                    (
                        x_shape.dims[..first].iter().product(),
                        x_shape.dims[first..=last].iter().product(),
                        x_shape.dims[last + 1..].iter().product(),
                    )
                };
                let kind = match kind {
                    crate::ir::ReduceKind::Sum => quote! { #k::Reduce::Sum },
                    crate::ir::ReduceKind::Mean => quote! { #k::Reduce::Mean },
                    crate::ir::ReduceKind::Max => quote! { #k::Reduce::Max },
                };
                let x = &read_args[0];
                quote! { #k::reduce(#kind, #outer, #len, #inner, #x, out); }
            }
            OpKind::Math(m) => {
                let m = format_ident!("{}", format!("{m:?}"));
                if in_place.is_some() {
                    quote! { #k::unary_math_inplace(#k::UnaryMath::#m, out); }
                } else {
                    let x = &read_args[0];
                    quote! { #k::unary_math(#k::UnaryMath::#m, #x, out); }
                }
            }
            OpKind::Constant(v) => {
                let v = f32_lit(*v);
                quote! { out[0] = #v; }
            }
            OpKind::Split { .. } => unreachable!("split is generated by `split`"),
            OpKind::Squeeze { .. } | OpKind::Unsqueeze { .. } => {
                unreachable!("inference turns these into reshapes")
            }
            OpKind::SliceDyn { .. } | OpKind::NonZero | OpKind::Range | OpKind::SplitDyn { .. } => {
                unreachable!("`dyn_op` emits these")
            }
            OpKind::Pow => {
                let geom = self.binary_nd_geom(op);
                let (a, b) = (&read_args[0], &read_args[1]);
                quote! { #k::pow_nd(&#geom, #a, #b, out); }
            }
            OpKind::Compare(cmp) => {
                let cmp = cmp_tokens(*cmp);
                let geom = self.binary_nd_geom(op);
                let (a, b) = (&read_args[0], &read_args[1]);
                quote! { #k::compare_nd(#k::CompareOp::#cmp, &#geom, #a, #b, out); }
            }
            OpKind::Cast(to) => {
                let x = &read_args[0];
                if *to == crate::ir::DType::Bool {
                    quote! { #k::cast_to_bool(#x, out); }
                } else {
                    quote! { #k::cast(#x, out); }
                }
            }
            OpKind::Gather { axis, indices } => {
                let a = *axis as usize;
                let outer: usize = x_shape.dims[..a].iter().product();
                let len = x_shape.dims[a];
                let inner: usize = x_shape.dims[a + 1..].iter().product();
                let x = &read_args[0];
                let idx = match indices {
                    Some(list) => quote! { &[#(#list),*][..] as &[i64] },
                    None => read_args[1].clone(),
                };
                quote! {
                    #k::gather(#outer, #len, #inner, #x, #idx, out)
                        .map_err(|e| ::kiln::__private::index_error("gather", e))?;
                }
            }
            OpKind::Slice { starts, steps, .. } => {
                let shape = &x_shape.dims;
                let starts = starts.iter().map(|&s| s as usize);
                let steps = steps.iter().map(|&s| s as isize);
                let dims = &y_shape.dims;
                let x = &read_args[0];
                quote! {
                    #k::slice(&#k::Slice { shape: &[#(#shape),*], starts: &[#(#starts),*], steps: &[#(#steps),*], out: &[#(#dims),*] }, #x, out);
                }
            }
            OpKind::Pad { pad, value } => {
                let (n, c, [h, w]) = (x_shape.batch(), x_shape.channels(), x_shape.spatial());
                let [pt, pl, pb, pr] = pad;
                let value = f32_lit(*value);
                let x = &read_args[0];
                quote! { (__k.pad2d)(#n, #c, #h, #w, [#pt, #pl, #pb, #pr], #value, #x, out); }
            }
            OpKind::Copy => {
                let x = &read_args[0];
                quote! { out.copy_from_slice(#x); }
            }
            OpKind::Reshape(_) => unreachable!("aliases return early"),
            OpKind::SeqEmpty(_)
            | OpKind::SeqConstruct
            | OpKind::SeqInsert { .. }
            | OpKind::SeqErase { .. }
            | OpKind::SeqAt { .. }
            | OpKind::SeqLen
            | OpKind::SeqInput { .. }
            | OpKind::SplitToSeq { .. }
            | OpKind::ConcatFromSeq { .. } => unreachable!("`seq_op` emits these"),
            OpKind::View { .. } => unreachable!("views return early"),
        };
        quote! {
            {
                let ([#(#read_ids),*], [#(#write_ids),*]) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], [#(#writes),*]);
                #out_view
                #call
            }
        }
    }

    /// Whether value `j` lives in a grow-only buffer of the model: a data-dependent tensor or
    /// a run-time sequence.
    fn in_dyn_buf(&self, j: usize) -> bool {
        self.graph.types[j].is_dynamic()
            || self
                .graph
                .seqs
                .get(j)
                .is_some_and(|s| s.as_ref().is_some_and(|s| s.run.is_some()))
    }

    /// The index of the run-time buffer of a data-dependent value (in value order).
    fn dyn_index(&self, v: ValueId) -> usize {
        (0..v.index()).filter(|&j| self.in_dyn_buf(j)).count()
    }

    /// The data-dependent values' buffers this variant uses.
    pub fn dyn_count(&self) -> usize {
        (0..self.graph.types.len())
            .filter(|&j| self.in_dyn_buf(j))
            .count()
    }

    /// Dimension `i` of `v` as an expression: a constant, or the run-time size variable.
    fn size(&self, v: ValueId, i: usize) -> TokenStream {
        let s = self.graph.shape(v);
        match s.run_dim(i) {
            Some(k) => {
                let d = format_ident!("__d{}", k);
                quote! { #d }
            }
            None => {
                let n = s.dims[i];
                quote! { #n }
            }
        }
    }

    fn sizes(&self, v: ValueId) -> Vec<TokenStream> {
        (0..self.graph.shape(v).rank())
            .map(|i| self.size(v, i))
            .collect()
    }

    /// The product of dimensions `range` of `v`, as an expression.
    fn product(&self, v: ValueId, range: std::ops::Range<usize>) -> TokenStream {
        let d: Vec<TokenStream> = range.map(|i| self.size(v, i)).collect();
        quote! { (1usize #(* #d)*) }
    }

    /// One op that reads or writes a data-dependent value: sizes are run-time expressions, such
    /// values live in the model's grow-only [`DynBuf`]s (`__dynK`), and an op that finds a new
    /// size (`slice` with run-time bounds, `nonzero`, a reshape's `-1`) defines its variable
    /// `__dK` for the ops after it.
    fn dyn_op(&self, i: usize) -> TokenStream {
        let op = &self.graph.ops[i];
        let k = quote! { ::kiln::__private::kernels };
        if let OpKind::SplitDyn { axis, .. } = op.kind {
            return self.dyn_split(op, axis as usize);
        }
        let y = op.result();
        let ys = self.graph.shape(y);
        let rank = ys.rank();
        let own = format_ident!("__dyn{}", self.dyn_index(y));
        let ydims = self.sizes(y);
        // Run-time size variables this op defines: declared here, assigned inside the op's block.
        let new_vars: Vec<u32> = match op.kind {
            OpKind::SliceDyn { .. } | OpKind::NonZero | OpKind::Range => {
                (0..rank).filter_map(|d| ys.run_dim(d)).collect()
            }
            _ => Vec::new(),
        };
        let declare = new_vars.iter().map(|v| {
            let d = format_ident!("__d{}", v);
            quote! { let #d: usize; }
        });
        let declare = quote! { #(#declare)* };
        if op.kind.is_alias() {
            // A reshape of a data-dependent value: its `-1` size, and its shape for outputs.
            let x = op.args[0];
            let total = self.product(x, 0..self.graph.shape(x).rank());
            let defs = (0..rank)
                .filter_map(|d| ys.run_dim(d).map(|v| (d, v)))
                .map(|(d, v)| {
                    let var = format_ident!("__d{}", v);
                    let known: usize = (0..rank).filter(|&e| e != d).map(|e| ys.dims[e]).product();
                    quote! { let #var: usize = #total / #known; }
                });
            return quote! {
                #(#defs)*
                #own.set_shape(&[#(#ydims),*]);
            };
        }
        let mut reads = Vec::new();
        let mut read_args = Vec::new();
        for a in &op.args {
            let s = self.graph.shape(*a);
            if s.is_dynamic() {
                let root = self.graph.alias_root(*a);
                let buf = format_ident!("__dyn{}", self.dyn_index(root));
                let t = rust_type(s.dtype);
                let len = self.product(*a, 0..s.rank());
                read_args.push(quote! { #buf.view::<#t>(#len) });
                continue;
            }
            read_args.push(self.read(*a, &mut reads));
        }
        let read_ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
        let (writes, write_ids, out) = if ys.is_dynamic() {
            let t = rust_type(ys.dtype);
            let len = self.product(y, 0..rank);
            let out = quote! { let out = #own.ensure::<#t>(#len, &[#(#ydims),*])?; };
            (vec![], vec![], out)
        } else {
            let Loc::Arena(o0, o1) = self.loc(y) else {
                unreachable!("results of ops live in the arena")
            };
            (
                vec![quote! { #o0..#o1 }],
                vec![format_ident!("out")],
                self.typed_mut(y, quote! { out }),
            )
        };
        let x = read_args.first().cloned().unwrap_or_default();
        // Definitions of new size variables that need the op's inputs, before `out` is sized.
        let mut defs = TokenStream::new();
        let call = match &op.kind {
            OpKind::Unary(act) => {
                let act = act_tokens(*act);
                quote! { (__k.unary)(#act, #x, out); }
            }
            OpKind::Math(m) => {
                let m = format_ident!("{}", format!("{m:?}"));
                quote! { #k::unary_math(#k::UnaryMath::#m, #x, out); }
            }
            OpKind::Cast(to) if *to == crate::ir::DType::Bool => {
                quote! { #k::cast_to_bool(#x, out); }
            }
            OpKind::Cast(_) => quote! { #k::cast(#x, out); },
            OpKind::Copy => quote! { out.copy_from_slice(#x); },
            OpKind::Binary(_) | OpKind::Compare(_) => {
                let aligned = |v: ValueId| {
                    let r = self.graph.shape(v).rank();
                    let mut d: Vec<TokenStream> =
                        (0..rank - r).map(|_| quote! { 1usize }).collect();
                    d.extend(self.sizes(v));
                    d
                };
                let (da, db) = (aligned(op.args[0]), aligned(op.args[1]));
                let b = &read_args[1];
                let geom =
                    quote! { &#k::BinaryNd { out: &__o, a_strides: &__sa, b_strides: &__sb } };
                let call = match &op.kind {
                    OpKind::Binary(bop) => {
                        let bop = format_ident!("{}", format!("{bop:?}"));
                        quote! { #k::binary_nd(#k::BinaryOp::#bop, #geom, #x, #b, out); }
                    }
                    OpKind::Compare(c) => {
                        let c = cmp_tokens(*c);
                        quote! { #k::compare_nd(#k::CompareOp::#c, #geom, #x, #b, out); }
                    }
                    _ => unreachable!(),
                };
                quote! {
                    let __o = [#(#ydims),*];
                    let __sa = ::kiln::__private::broadcast_strides([#(#da),*], __o);
                    let __sb = ::kiln::__private::broadcast_strides([#(#db),*], __o);
                    #call
                }
            }
            OpKind::Reduce { kind, axes, .. } => {
                let xv = op.args[0];
                let xs = self.graph.shape(xv);
                let big: Vec<usize> = axes
                    .iter()
                    .map(|&a| a as usize)
                    .filter(|&a| xs.dims[a] != 1 || xs.run_dim(a).is_some())
                    .collect();
                let (outer, len, inner) = match (big.first(), big.last()) {
                    (Some(&f), Some(&l)) => (
                        self.product(xv, 0..f),
                        self.product(xv, f..l + 1),
                        self.product(xv, l + 1..xs.rank()),
                    ),
                    _ => (
                        self.product(xv, 0..xs.rank()),
                        quote! { 1usize },
                        quote! { 1usize },
                    ),
                };
                let kind = match kind {
                    crate::ir::ReduceKind::Sum => quote! { #k::Reduce::Sum },
                    crate::ir::ReduceKind::Mean => quote! { #k::Reduce::Mean },
                    crate::ir::ReduceKind::Max => quote! { #k::Reduce::Max },
                };
                quote! { #k::reduce(#kind, #outer, #len, #inner, #x, out); }
            }
            OpKind::Gather { axis, .. } => {
                let xs = self.graph.shape(op.args[0]);
                let a = *axis as usize;
                let outer: usize = xs.dims[..a].iter().product();
                let len = xs.dims[a];
                let inner: usize = xs.dims[a + 1..].iter().product();
                let idx = &read_args[1];
                quote! {
                    #k::gather(#outer, #len, #inner, #x, #idx, out)
                        .map_err(|e| ::kiln::__private::index_error("gather", e))?;
                }
            }
            OpKind::SliceDyn { axes } => {
                let xs = self.graph.shape(op.args[0]);
                let (starts, ends) = (&read_args[1], &read_args[2]);
                let mut first: Vec<TokenStream> = (0..rank).map(|_| quote! { 0usize }).collect();
                for (j, &a) in axes.iter().enumerate() {
                    let a = a as usize;
                    let dim = xs.dims[a];
                    let st = format_ident!("__st{}", j);
                    let var = format_ident!(
                        "__d{}",
                        ys.run_dim(a).expect("sliced axes have run-time sizes")
                    );
                    defs.extend(quote! {
                        let (#st, __n) = ::kiln::__private::slice_bounds(#starts[#j], #ends[#j], #dim);
                        #var = __n;
                    });
                    first[a] = quote! { #st };
                }
                let shape = &xs.dims;
                let ones = vec![quote! { 1isize }; rank];
                quote! {
                    #k::slice(&#k::Slice { shape: &[#(#shape),*], starts: &[#(#first),*], steps: &[#(#ones),*], out: &[#(#ydims),*] }, #x, out);
                }
            }
            OpKind::Range => {
                let var = format_ident!(
                    "__d{}",
                    ys.run_dim(0).expect("range's count is a run-time size")
                );
                let (l, d) = (&read_args[1], &read_args[2]);
                let count = if matches!(ys.dtype, crate::ir::DType::F32 | crate::ir::DType::F64) {
                    quote! { ::kiln::__private::range_count_f64(#x[0] as f64, #l[0] as f64, #d[0] as f64)? }
                } else {
                    quote! { ::kiln::__private::range_count_i64(#x[0] as i64, #l[0] as i64, #d[0] as i64)? }
                };
                defs.extend(quote! { #var = #count; });
                quote! { #k::range(#x[0], #d[0], out); }
            }
            OpKind::NonZero => {
                let xs = self.graph.shape(op.args[0]);
                let var = format_ident!(
                    "__d{}",
                    ys.run_dim(1).expect("nonzero's count is a run-time size")
                );
                let shape = &xs.dims;
                defs.extend(quote! { #var = #k::nonzero_count(#x); });
                quote! { #k::nonzero(&[#(#shape),*], #var, #x, out); }
            }
            other => unreachable!("inference rejects {} on run-time sizes", other.name()),
        };
        quote! {
            #declare
            {
                let ([#(#read_ids),*], [#(#write_ids),*]) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], [#(#writes),*]);
                #defs
                #out
                #call
            }
        }
    }

    /// `split` with run-time sizes: reads the sizes, checks they add up, then one copy per result
    /// into its grow-only buffer.
    fn dyn_split(&self, op: &crate::ir::Op, axis: usize) -> TokenStream {
        let k = quote! { ::kiln::__private::kernels };
        let x = op.args[0];
        let xs = self.graph.shape(x);
        let outer: usize = xs.dims[..axis].iter().product();
        let inner: usize = xs.dims[axis + 1..].iter().product();
        let dim = xs.dims[axis];
        let total = dim * inner;
        let mut reads = Vec::new();
        let mut args = Vec::new();
        for a in &op.args {
            args.push(self.read(*a, &mut reads));
        }
        let read_ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
        let (xa, sizes) = (&args[0], &args[1]);
        let vars: Vec<_> = op
            .results
            .iter()
            .map(|r| {
                format_ident!(
                    "__d{}",
                    self.graph
                        .shape(*r)
                        .run_dim(axis)
                        .expect("split sizes are run-time sizes")
                )
            })
            .collect();
        let parts = vars.len();
        let idx: Vec<usize> = (0..parts).collect();
        let t = rust_type(xs.dtype);
        let copies = op.results.iter().zip(&vars).map(|(r, var)| {
            let buf = format_ident!("__dyn{}", self.dyn_index(*r));
            let dims = self.sizes(*r);
            quote! {
                {
                    let part = #var * #inner;
                    let out = #buf.ensure::<#t>(#outer * part, &[#(#dims),*])?;
                    #k::copy_from_axis(#outer, part, #total, __offset, #xa, out);
                    __offset += part;
                }
            }
        });
        quote! {
            #(let #vars: usize;)*
            {
                let ([#(#read_ids),*], []) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], []);
                let __sz = ::kiln::__private::split_sizes::<#parts>(#sizes, #dim)?;
                #(#vars = __sz[#idx];)*
                let mut __offset = 0usize;
                #(#copies)*
            }
        }
    }

    /// How an op reads the static value `v`: an input's slice, a parameter range, or an arena
    /// region (pushed onto `reads` for the op's `io` call, bound to `r<k>`), typed.
    fn read(&self, v: ValueId, reads: &mut Vec<TokenStream>) -> TokenStream {
        match self.loc(v) {
            Loc::Input(n, part) => input_tokens(n, part),
            Loc::Arena(a0, a1) => {
                let id = format_ident!("r{}", reads.len());
                reads.push(quote! { #a0..#a1 });
                self.typed(v, quote! { #id })
            }
            Loc::Param(a0, a1) => quote! { &__params[#a0..#a1] },
        }
    }

    /// The rank-N broadcast geometry of a two-operand op with static shapes.
    fn binary_nd_geom(&self, op: &crate::ir::Op) -> TokenStream {
        let out = &self.graph.shape(op.result()).dims;
        let strides = |v: ValueId| broadcast_strides(&self.graph.shape(v).dims, out, 1);
        let (sa, sb) = (strides(op.args[0]), strides(op.args[1]));
        quote! {
            ::kiln::__private::kernels::BinaryNd { out: &[#(#out),*], a_strides: &[#(#sa),*], b_strides: &[#(#sb),*] }
        }
    }

    /// `region` (an f32 arena region holding `v`) as a slice of `v`'s element type.
    fn typed(&self, v: ValueId, region: TokenStream) -> TokenStream {
        let s = self.graph.shape(v);
        if s.dtype == crate::ir::DType::F32 {
            return region;
        }
        let t = rust_type(s.dtype);
        let len = s.elements();
        quote! { ::kiln::__private::view::<#t>(#region, #len) }
    }

    /// Rebinds the writable region `id` as a slice of `v`'s element type (nothing for f32).
    fn typed_mut(&self, v: ValueId, id: TokenStream) -> TokenStream {
        let s = self.graph.shape(v);
        if s.dtype == crate::ir::DType::F32 {
            return TokenStream::new();
        }
        let t = rust_type(s.dtype);
        let len = s.elements();
        quote! { let #id = ::kiln::__private::view_mut::<#t>(#id, #len); }
    }

    /// `split`: one copy per result, each into its own arena region.
    fn split(&self, op: &crate::ir::Op, axis: usize, sizes: &[usize]) -> TokenStream {
        let k = quote! { ::kiln::__private::kernels };
        let x_shape = self.graph.shape(op.args[0]);
        let outer: usize = x_shape.dims[..axis].iter().product();
        let inner: usize = x_shape.dims[axis + 1..].iter().product();
        let total = x_shape.dims[axis] * inner;
        let (reads, x) = match self.loc(op.args[0]) {
            Loc::Input(n, part) => (vec![], input_tokens(n, part)),
            Loc::Arena(a0, a1) => (
                vec![quote! { #a0..#a1 }],
                self.typed(op.args[0], quote! { r0 }),
            ),
            Loc::Param(a0, a1) => (vec![], quote! { &__params[#a0..#a1] }),
        };
        let read_ids: Vec<_> = (0..reads.len()).map(|j| format_ident!("r{}", j)).collect();
        let mut writes = Vec::new();
        let mut write_ids = Vec::new();
        let mut copies = Vec::new();
        let mut offset = 0usize;
        for (j, (r, &size)) in op.results.iter().zip(sizes).enumerate() {
            let Loc::Arena(o0, o1) = self.loc(*r) else {
                unreachable!("split results live in the arena")
            };
            let id = format_ident!("out{}", j);
            writes.push(quote! { #o0..#o1 });
            let part = size * inner;
            let view = self.typed_mut(*r, quote! { #id });
            copies.push(
                quote! { #view #k::copy_from_axis(#outer, #part, #total, #offset, #x, #id); },
            );
            write_ids.push(id);
            offset += part;
        }
        quote! {
            {
                let ([#(#read_ids),*], [#(#write_ids),*]) = ::kiln::__private::io(&mut *__arena, [#(#reads),*], [#(#writes),*]);
                #(#copies)*
            }
        }
    }

    fn bias(&self, i: usize, op: &crate::ir::Op, has_bias: bool) -> TokenStream {
        let given = has_bias
            .then(|| self.params.of_value(self.graph, op.args[2]))
            .flatten();
        match given.or(self.params.bias[i]) {
            Some(slot) => {
                let r = range(slot);
                quote! { ::core::option::Option::Some(&__params[#r]) }
            }
            None => quote! { ::core::option::Option::None },
        }
    }
}

/// The sizes of a 3-D window op as `[d, h, w]`.
/// Input `n`'s slice, or the element range `part` of it.
fn input_tokens(n: usize, part: Option<(usize, usize)>) -> TokenStream {
    let id = format_ident!("__x{}", n);
    match part {
        None => quote! { #id },
        Some((a, b)) => quote! { &#id[#a..#b] },
    }
}

fn three(v: &[usize]) -> [usize; 3] {
    v.try_into().expect("the IR verifier checks window ranks")
}

/// Element strides, over the dimensions of `out`, of an operand of sizes `dims` (right-aligned
/// with `out`, missing leading sizes counting as 1): 0 where a size 1 is broadcast, and `unit`
/// elements per step of the last dimension (one matrix, for matmul's batch dimensions).
fn broadcast_strides(dims: &[usize], out: &[usize], unit: usize) -> Vec<usize> {
    let lead = out.len() - dims.len();
    let size = |i: usize| if i < lead { 1 } else { dims[i - lead] };
    let mut st = vec![0; out.len()];
    let mut acc = unit;
    for i in (0..out.len()).rev() {
        st[i] = if size(i) == 1 && out[i] != 1 { 0 } else { acc };
        acc *= size(i);
    }
    st
}

/// The kernels' name of a comparison.
fn cmp_tokens(c: crate::ir::CmpOp) -> proc_macro2::Ident {
    use crate::ir::CmpOp;
    let name = match c {
        CmpOp::Equal => "Eq",
        CmpOp::Less => "Less",
        CmpOp::Greater => "Greater",
        CmpOp::LessEq => "LessEq",
        CmpOp::GreaterEq => "GreaterEq",
    };
    format_ident!("{}", name)
}

/// The Rust element type of a dtype (`bool` is stored as `u8`, 0 or 1).
fn rust_type(d: crate::ir::DType) -> TokenStream {
    use crate::ir::DType;
    match d {
        DType::F32 => quote! { f32 },
        DType::F64 => quote! { f64 },
        DType::I64 => quote! { i64 },
        DType::I32 => quote! { i32 },
        DType::U8 | DType::Bool => quote! { u8 },
    }
}

fn f32_lit(x: f32) -> TokenStream {
    if x == f32::INFINITY {
        quote! { f32::INFINITY }
    } else if x == f32::NEG_INFINITY {
        quote! { f32::NEG_INFINITY }
    } else {
        let lit = Literal::f32_suffixed(x);
        quote! { #lit }
    }
}

fn act_tokens(act: Act) -> TokenStream {
    let a = quote! { ::kiln::__private::kernels::Activation };
    match act {
        Act::None => quote! { #a::None },
        Act::Relu => quote! { #a::Relu },
        Act::Clip { min, max } => {
            let (min, max) = (f32_lit(min), f32_lit(max));
            quote! { #a::Clip { min: #min, max: #max } }
        }
        Act::LeakyRelu { alpha } => {
            let alpha = f32_lit(alpha);
            quote! { #a::LeakyRelu { alpha: #alpha } }
        }
        Act::Sigmoid => quote! { #a::Sigmoid },
        Act::Tanh => quote! { #a::Tanh },
    }
}

/// Strides of `a` and `b` over the output's shape, padded on the left to rank 4, with 0 where a
/// size-1 dimension is broadcast.
fn broadcast_tokens(a: &Shape, b: &Shape, out: &Shape) -> TokenStream {
    let mut shape = vec![1; 4 - out.rank()];
    shape.extend(&out.dims);
    let (sa, sb) = (
        broadcast_strides(&a.dims, &shape, 1),
        broadcast_strides(&b.dims, &shape, 1),
    );
    quote! {
        ::kiln::__private::kernels::Broadcast { shape: [#(#shape),*], a_strides: [#(#sa),*], b_strides: [#(#sb),*] }
    }
}

/// The model type for one network compiled for one or several shapes (`variants`, at least
/// one): shared weights and parameter buffer, one `exec` per variant, and a `run` that picks
/// the variant from the inputs' shapes.
///
/// `blocked`: the blocked-layout plan of a network of one shape, compiled beside the NCHW one
/// as `exec_blocked` (`run` picks it where `Kernels::blocked` says).
pub fn generate(variants: &[Model<'_>], blocked: Option<&Model<'_>>) -> TokenStream {
    let m = &variants[0];
    let multi = variants.len() > 1 || !m.label.is_empty();
    debug_assert!(
        !(multi && blocked.is_some()),
        "blocked plans only for one shape"
    );
    let sig = m.sig;
    let attrs = &sig.attrs;
    let vis = &sig.vis;
    let name = &sig.name;
    let max = |f: fn(&Plan) -> usize| variants.iter().map(|v| f(v.plan)).max().unwrap_or(0);
    // The arena serves both plans.
    let arena_bytes = max(|p| p.arena_bytes).max(blocked.map_or(0, |b| b.plan.arena_bytes));
    let lower = max(|p| p.lower_bound);
    let naive = max(|p| p.naive_bytes);
    let params_len = m.params.len;
    let plan_text = m.plan_text;

    let input_idents: Vec<_> = (0..m.graph.inputs.len())
        .map(|i| format_ident!("__x{}", i))
        .collect();
    let input_elems: Vec<TokenStream> = m
        .graph
        .inputs
        .iter()
        .map(|i| rust_type(m.graph.shape(i.value).dtype))
        .collect();
    // Per declared input: its parameter of `run`/`run_in`, with a generic type for a tensor;
    // a sequence input (`seq<..., N>`, `N` graph inputs) is a `kiln::Seq` whose tensors the
    // prelude unpacks. `user_names` is, per graph input, the expression that holds it.
    let mut generics = Vec::new();
    let mut params = Vec::new();
    let mut prelude = Vec::new();
    let mut user_names: Vec<TokenStream> = Vec::new();
    // Sequence inputs without a length: `exec` takes each as a `&dyn AsSeq<T>` (`__s<slot>`).
    let mut seq_params = Vec::new();
    let mut seq_args = Vec::new();
    for d in &sig.inputs {
        let name = &d.name;
        let gi = user_names.len();
        if d.run_seq {
            let slot = seq_args.len();
            let dtype = m
                .graph
                .ops
                .iter()
                .find_map(|op| match &op.kind {
                    OpKind::SeqInput { slot: s, dtype, .. } if *s == slot => Some(*dtype),
                    _ => None,
                })
                .unwrap_or(crate::ir::DType::F32);
            let t = rust_type(dtype);
            let s = format_ident!("S{}", slot);
            let id = format_ident!("__s{}", slot);
            generics.push(quote! { #s: ::kiln::__private::AsSeq<#t> });
            params.push(quote! { #name: &#s });
            seq_params.push(quote! { #id: &dyn ::kiln::__private::AsSeq<#t> });
            seq_args.push(quote! { #name });
            continue;
        }
        match d.seq_len {
            Some(n) => {
                let t = &input_elems[gi];
                let ids: Vec<_> = (0..n).map(|k| format_ident!("__{}_{}", name, k)).collect();
                params.push(quote! { #name: &::kiln::__private::Seq<'_, #t, #n> });
                prelude.push(quote! { let [#(#ids),*] = #name.tensors(); });
                user_names.extend(ids.iter().map(|id| quote! { &#id }));
            }
            None => {
                let x = format_ident!("X{}", gi);
                let t = &input_elems[gi];
                generics.push(quote! { #x: ?Sized + ::kiln::__private::AsInput<#t> });
                params.push(quote! { #name: &#x });
                user_names.push(quote! { #name });
            }
        }
    }
    let prelude = quote! { #(#prelude)* };
    let input_checks = |m: &Model| {
        let checks = m
            .graph
            .inputs
            .iter()
            .zip(&input_idents)
            .zip(&user_names)
            .map(|((input, id), user)| {
                let n = input.name.as_str();
                let shape = m.graph.shape(input.value);
                let ty = shape.to_string();
                let len = shape.elements();
                let t = rust_type(shape.dtype);
                quote! { let #id = ::kiln::__private::input::<#t, _>(#n, #ty, #user, #len)?; }
            });
        quote! { #(#checks)* }
    };
    let shape_consts = |vals: &mut dyn Iterator<Item = ValueId>| {
        let items = vals.map(|v| {
            let dims = &m.graph.shape(v).dims;
            quote! { &[#(#dims),*] }
        });
        quote! { &[#(#items),*] }
    };
    let input_shapes = shape_consts(&mut m.graph.inputs.iter().map(|i| i.value));
    let output_shapes = shape_consts(&mut m.graph.outputs.iter().map(|o| o.value));

    let tensor_ty = |v: ValueId| match m.graph.shape(v).dtype {
        crate::ir::DType::F32 => quote! { ::kiln::__private::Tensor<'a> },
        d => {
            let t = rust_type(d);
            quote! { ::kiln::__private::Tensor<'a, #t> }
        }
    };
    let out_tys: Vec<TokenStream> = m
        .graph
        .outputs
        .iter()
        .map(|o| match m.graph.seq(o.value) {
            Some(s) if s.run.is_some() => {
                let t = rust_type(s.dtype);
                quote! { ::kiln::__private::RunSeq<'a, #t> }
            }
            Some(s) => {
                let t = rust_type(s.dtype);
                let n = s.len;
                quote! { ::kiln::__private::Seq<'a, #t, #n> }
            }
            None => tensor_ty(o.value),
        })
        .collect();
    let out_ty = if out_tys.len() == 1 {
        out_tys[0].clone()
    } else {
        quote! { (#(#out_tys),*) }
    };
    // One `exec` per variant: the straight line of kernel calls for its shapes and plan.
    // Data-dependent values: one grow-only buffer each, owned by the model.
    let n_dyn = variants.iter().map(Model::dyn_count).max().unwrap_or(0);
    let dyn_names: Vec<_> = (0..n_dyn).map(|j| format_ident!("__dyn{}", j)).collect();
    let (dyn_param, dyn_open, dyn_close, dyn_arg) = if n_dyn > 0 {
        (
            quote! { __dyn: &'a mut [::kiln::__private::DynBuf; #n_dyn], },
            quote! { let [#(#dyn_names),*] = __dyn; },
            quote! { #(let #dyn_names: &'a ::kiln::__private::DynBuf = #dyn_names;)* },
            quote! { &mut self.dynamic, },
        )
    } else {
        (quote! {}, quote! {}, quote! {}, quote! {})
    };
    let exec_fn = |exec: syn::Ident, m: &Model<'_>| {
        let body = m
            .graph
            .ops
            .iter()
            .enumerate()
            .map(|(i, _)| m.profiled(i, m.op(i)));
        let outputs: Vec<TokenStream> = m
                .graph
                .outputs
                .iter()
                .map(|o| {
                    if m.graph.seq(o.value).is_some_and(|s| s.run.is_some()) {
                        let buf = format_ident!("__dyn{}", m.dyn_index(o.value));
                        return quote! { ::kiln::__private::RunSeq::new(#buf) };
                    }
                    if m.graph.seq(o.value).is_some() {
                        return m.seq_output(o.value);
                    }
                    let s = m.graph.shape(o.value);
                    if s.is_dynamic() {
                        let root = format_ident!("__dyn{}", m.dyn_index(m.graph.alias_root(o.value)));
                        let own = format_ident!("__dyn{}", m.dyn_index(o.value));
                        let t = rust_type(s.dtype);
                        let len = m.product(o.value, 0..s.rank());
                        return quote! { ::kiln::__private::Tensor::new(#root.view::<#t>(#len), #own.shape()) };
                    }
                    let Loc::Arena(a, b) = m.loc(o.value) else {
                        unreachable!("lowering copies input-backed outputs into the arena")
                    };
                    let dims = &m.graph.shape(o.value).dims;
                    let data = m.typed(o.value, quote! { &__arena[#a..#b] });
                    quote! { ::kiln::__private::Tensor::new(#data, &[#(#dims),*]) }
                })
                .collect();
        let out_expr = if outputs.len() == 1 {
            outputs[0].clone()
        } else {
            quote! { (#(#outputs),*) }
        };
        let doc = if m.label.is_empty() {
            quote! {}
        } else {
            let d = format!("The variant {}.", m.label);
            quote! { #[doc = #d] }
        };
        quote! {
            #doc
            #[allow(unused_variables, clippy::too_many_arguments)]
            fn #exec<'a>(__k: &::kiln::__private::kernels::Kernels, __par: &dyn ::kiln::__private::kernels::par::Parallel, __params: &[f32], __arena: &'a mut [f32], #dyn_param #(#seq_params,)* #(#input_idents: &[#input_elems]),*) -> ::core::result::Result<#out_ty, ::kiln::__private::Error> {
                #dyn_open
                #(#body)*
                let __arena: &'a [f32] = __arena;
                #dyn_close
                ::core::result::Result::Ok(#out_expr)
            }
        }
    };
    let mut execs = TokenStream::new();
    for (k, m) in variants.iter().enumerate() {
        let exec = if multi {
            format_ident!("exec_{}", k)
        } else {
            format_ident!("exec")
        };
        execs.extend(exec_fn(exec, m));
    }
    if let Some(b) = blocked {
        execs.extend(exec_fn(format_ident!("exec_blocked"), b));
    }
    // The call of the right `exec`: directly, or after choosing the variant by the inputs'
    // shapes.
    // `caller_arena`: `run_in`, whose arena is checked against the chosen variant's plan.
    let dispatch = |caller_arena: bool| {
        let arena_of = |bytes: usize| {
            if caller_arena {
                quote! { ::kiln::__private::arena_f32(arena, #bytes)? }
            } else {
                quote! { self.arena.as_mut_slice() }
            }
        };
        if !multi {
            let checks = input_checks(m);
            let arena = arena_of(arena_bytes);
            if blocked.is_none() {
                return quote! {
                    #checks
                    Self::exec(self.kernels, &self.threads, self.params.as_slice(), #arena, #dyn_arg #(#seq_args,)* #(#input_idents),*)
                };
            }
            // The blocked plan where the table's blocked convolution is the faster.
            return quote! {
                #checks
                let __exec = if self.kernels.blocked { Self::exec_blocked } else { Self::exec };
                __exec(self.kernels, &self.threads, self.params.as_slice(), #arena, #dyn_arg #(#seq_args,)* #(#input_idents),*)
            };
        }
        let arms = variants.iter().enumerate().map(|(k, m)| {
            let exec = format_ident!("exec_{}", k);
            let checks = input_checks(m);
            let arena = arena_of(m.plan.arena_bytes);
            quote! {
                #k => {
                    #checks
                    let __arena = #arena;
                    Self::#exec(self.kernels, &self.threads, self.params.as_slice(), __arena, #dyn_arg #(#seq_args,)* #(#input_idents),*)
                }
            }
        });
        let names = m.graph.inputs.iter().map(|i| i.name.as_str());
        quote! {
            let __variant = ::kiln::__private::select_variant(
                &[#((#names, ::kiln::__private::AsInput::<#input_elems>::shape(#user_names), ::kiln::__private::AsInput::<#input_elems>::values(#user_names)?.len())),*],
                Self::VARIANT_INPUT_SHAPES,
            )?;
            match __variant {
                #(#arms)*
                _ => ::core::unreachable!("select_variant returns a listed variant"),
            }
        }
    };
    let run_body = dispatch(false);
    let run_in_body = dispatch(true);
    let variant_consts = if multi {
        let labels = variants.iter().map(|v| v.label);
        let arenas = variants.iter().map(|v| v.plan.arena_bytes);
        let shapes = variants.iter().map(|v| {
            let items = v.graph.inputs.iter().map(|i| {
                let dims = &v.graph.shape(i.value).dims;
                quote! { &[#(#dims),*] }
            });
            quote! { &[#(#items),*] }
        });
        quote! {
            /// The precompiled shapes, as the values of the size symbols.
            pub const VARIANTS: &'static [&'static str] = &[#(#labels),*];
            /// Each variant's input shapes (in declaration order); `run` picks the variant
            /// whose shapes the inputs have.
            pub const VARIANT_INPUT_SHAPES: &'static [&'static [&'static [usize]]] = &[#(#shapes),*];
            /// Each variant's planned arena; `ARENA_BYTES` is the largest.
            pub const VARIANT_ARENA_BYTES: &'static [usize] = &[#(#arenas),*];
        }
    } else {
        quote! {}
    };
    let out_ty_self = {
        let s = out_ty.to_string().replace("'a", "'_");
        s.parse::<TokenStream>().unwrap_or_else(|_| out_ty.clone())
    };

    let prepare = m.steps.iter().map(Step::tokens);
    let prepare = quote! { #(#prepare)* };
    let scratch_asserts = variants.iter().chain(blocked).map(|v| v.scratch_asserts());
    let scratch_asserts = quote! { #(#scratch_asserts)* };
    let specs = m.graph.params.iter().enumerate().map(|(i, p)| {
            let key = &p.key;
            let shape = &p.shape.dims;
            let dst = m.params.params[i].start;
            let src = m.weights.map_or(0, |w| w.offsets[i]);
            quote! { ::kiln::__private::TensorSpec { name: #key, shape: &[#(#shape),*], dst: #dst, src: #src } }
        });
    let file_name = |w: &WeightsFile| {
        w.path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let (embedded, new_fn) = match (m.weights, m.embedded) {
        // Prepared at compile time: `new` borrows the embedded buffer where it lies.
        (Some(w), Some(e)) => {
            let packed = prepare::packed(m.steps);
            let p_start = packed.iter().map(|p| p.0);
            let p_groups = packed.iter().map(|p| p.1);
            let p_m = packed.iter().map(|p| p.2);
            let p_k = packed.iter().map(|p| p.3);
            let path = e.path.to_string_lossy().into_owned();
            let len = e.len;
            let source = w.path.to_string_lossy().into_owned();
            let source_len = w.header.file_len;
            let doc = format!(
                "The model with the weights of `{}`, folded and laid out at compile time and read \
                 in place from the binary (nothing is copied).",
                file_name(w)
            );
            (
                quote! {
                    // The array length restates the buffer the compiler laid out.
                    static __PREPARED: ::kiln::__private::Aligned<[u8; #len]> = ::kiln::__private::Aligned(*::core::include_bytes!(#path));
                    // The weights file itself is only read here, at compile time, so that Cargo
                    // rebuilds when it changes; its length is the one the header was checked
                    // against.
                    const _: () = ::core::assert!(::core::include_bytes!(#source).len() == #source_len);
                },
                quote! {
                    #[doc = #doc]
                    #[must_use]
                    pub fn new() -> Self {
                        let __k = ::kiln::__private::kernels::best();
                        let params = ::kiln::__private::params_in_place(&__PREPARED.0, __k.weights, &[#((#p_start, #p_groups, #p_m, #p_k)),*]);
                        Self::from_parts(params, ::kiln::__private::AlignedBuf::zeroed(#arena_bytes / 4), __k)
                    }
                },
            )
        }
        (Some(w), None) => {
            let path = w.path.to_string_lossy().into_owned();
            let len = w.header.file_len;
            let doc = format!(
                "Loads the weights embedded from `{}` at compile time.",
                file_name(w)
            );
            (
                quote! {
                    // The array length restates the file size the compiler checked the header
                    // against: if the file changed in between, this does not compile.
                    static __WEIGHTS: ::kiln::__private::Aligned<[u8; #len]> = ::kiln::__private::Aligned(*::core::include_bytes!(#path));
                },
                quote! {
                    #[doc = #doc]
                    #[must_use]
                    pub fn new() -> Self {
                        let mut params = ::kiln::__private::AlignedBuf::zeroed(#params_len);
                        ::kiln::__private::load_embedded(&__WEIGHTS.0, __TENSORS, params.as_mut_slice());
                        Self::with_params(params, ::kiln::__private::AlignedBuf::zeroed(#arena_bytes / 4))
                    }
                },
            )
        }
        // Nothing to load: a network without parameters still gets `new`.
        (None, _) if m.params.len == 0 => (
            quote! {},
            quote! {
                /// The model (it has no parameters to load).
                #[must_use]
                pub fn new() -> Self {
                    Self::with_params(::kiln::__private::AlignedBuf::zeroed(0), ::kiln::__private::AlignedBuf::zeroed(#arena_bytes / 4))
                }
            },
        ),
        (None, _) => (quote! {}, quote! {}),
    };
    // `run_in` runs in the caller's arena with `&self`; a model with data-dependent values
    // needs its own grow-only buffers, so it has `run` only.
    let (dyn_field, dyn_init) = if n_dyn > 0 {
        (
            quote! {
                /// Grow-only buffers of the data-dependent values.
                dynamic: [::kiln::__private::DynBuf; #n_dyn],
            },
            quote! { dynamic: [const { ::kiln::__private::DynBuf::new() }; #n_dyn], },
        )
    } else {
        (quote! {}, quote! {})
    };
    let run_in_fn = if n_dyn == 0 {
        quote! {
                /// Runs the network in a caller-provided arena of at least `ARENA_BYTES` bytes
                /// (with several precompiled shapes, the chosen variant's
                /// `VARIANT_ARENA_BYTES`), plus up to 63 bytes if it is not 64-byte aligned;
                /// the outputs borrow from it. Allocates nothing.
                #[allow(clippy::too_many_arguments)]
                pub fn run_in<'a, #(#generics),*>(&self, arena: &'a mut [u8], #(#params),*) -> ::core::result::Result<#out_ty, ::kiln::__private::Error> {
                    #prelude
                    #run_in_body
                }
        }
    } else {
        quote! {}
    };
    let debug_name = name.to_string();

    quote! {
        #(#attrs)*
        #vis struct #name {
            params: ::kiln::__private::Params,
            arena: ::kiln::__private::AlignedBuf,
            kernels: &'static ::kiln::__private::kernels::Kernels,
            /// The threads the large kernels split their work among (one by default).
            threads: ::kiln::__private::Threads,
            #dyn_field
        }

        const _: () = {
            #embedded
            const __TENSORS: &[::kiln::__private::TensorSpec] = &[#(#specs),*];
            #scratch_asserts

            impl #name {
                /// Bytes of the arena one inference needs (planned at compile time).
                pub const ARENA_BYTES: usize = #arena_bytes;
                /// The most bytes live at any one step: no plan can use less.
                pub const ARENA_LOWER_BOUND: usize = #lower;
                /// Bytes every intermediate would take without any reuse.
                pub const ARENA_NAIVE_BYTES: usize = #naive;
                /// f32 values in the prepared parameter buffer.
                pub const PARAMS_LEN: usize = #params_len;
                #variant_consts
                /// Shapes of the inputs, in declaration order (of the first variant, if
                /// there are several).
                pub const INPUT_SHAPES: &'static [&'static [usize]] = #input_shapes;
                /// Shapes of the outputs, in declaration order (of the first variant).
                pub const OUTPUT_SHAPES: &'static [&'static [usize]] = #output_shapes;
                /// The memory plan, printed.
                pub const PLAN: &'static str = #plan_text;

                #new_fn

                /// Loads weights from the bytes of a safetensors file, checking that every
                /// tensor the network needs is present with dtype F32 and the right shape.
                pub fn from_safetensors(bytes: &[u8]) -> ::core::result::Result<Self, ::kiln::__private::Error> {
                    let mut params = ::kiln::__private::AlignedBuf::try_zeroed(#params_len)?;
                    ::kiln::__private::load_safetensors(bytes, __TENSORS, params.as_mut_slice())?;
                    ::core::result::Result::Ok(Self::with_params(params, ::kiln::__private::AlignedBuf::try_zeroed(#arena_bytes / 4)?))
                }

                /// Prepares loaded weights (`prepare`), then builds the model around them.
                fn with_params(mut params: ::kiln::__private::AlignedBuf, arena: ::kiln::__private::AlignedBuf) -> Self {
                    // The ISA is chosen once, here (or in `new`); `run` never detects.
                    let __k = ::kiln::__private::kernels::best();
                    Self::prepare(__k, params.as_mut_slice());
                    Self::from_parts(::kiln::__private::Params::Owned(params), arena, __k)
                }

                /// The model around parameters prepared for the kernels `__k`.
                fn from_parts(params: ::kiln::__private::Params, arena: ::kiln::__private::AlignedBuf, __k: &'static ::kiln::__private::kernels::Kernels) -> Self {
                    Self {
                        params,
                        arena,
                        kernels: __k,
                        threads: ::kiln::__private::Threads::one(),
                        #dyn_init
                    }
                }

                #[allow(unused_variables)]
                fn prepare(__k: &::kiln::__private::kernels::Kernels, __params: &mut [f32]) {
                    #prepare
                }

                /// Runs one inference on `n` threads from now on: this one plus `n - 1` worker
                /// threads, started now and stopped when the model is dropped (or when
                /// `set_threads` is called again; 0 and 1 mean this thread alone, the
                /// default). The convolutions that run as GEMMs (pointwise, im2col, Winograd)
                /// split their work among them; a run still allocates nothing.
                /// `Err(kiln::Error::Threads)` if the system refuses a thread.
                pub fn set_threads(&mut self, n: usize) -> ::core::result::Result<(), ::kiln::__private::Error> {
                    // Stop the old workers before starting the new ones.
                    self.threads = ::kiln::__private::Threads::one();
                    self.threads = ::kiln::__private::Threads::new(n)?;
                    ::core::result::Result::Ok(())
                }

                /// The number of threads one inference runs on (see `set_threads`).
                pub fn threads(&self) -> usize {
                    self.threads.count()
                }

                /// Runs the network in the model's own arena. Allocates nothing.
                #[allow(clippy::too_many_arguments)]
                pub fn run<#(#generics),*>(&mut self, #(#params),*) -> ::core::result::Result<#out_ty_self, ::kiln::__private::Error> {
                    #prelude
                    #run_body
                }

                #run_in_fn

                #execs
            }

            impl ::core::fmt::Debug for #name {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    f.debug_struct(#debug_name)
                        .field("isa", &self.kernels.isa)
                        .field("threads", &self.threads.count())
                        .field("arena_bytes", &#arena_bytes)
                        .field("params", &#params_len)
                        .finish()
                }
            }
        };
    }
}

/// What an erroneous network still expands to next to its `compile_error!`s: the declared
/// type with its methods stubbed, so uses of it elsewhere do not pile up follow-on errors.
pub fn fallback(def: &NetworkDef) -> TokenStream {
    let attrs = &def.attrs;
    let vis = &def.vis;
    let name = &def.name;
    let input_tys: Vec<_> = (0..def.inputs.len())
        .map(|i| format_ident!("X{}", i))
        .collect();
    // Generated names: the user's may be what is wrong (declared twice, say).
    let user_names: Vec<_> = (0..def.inputs.len())
        .map(|i| format_ident!("_x{}", i))
        .collect();
    let outs: Vec<_> = def
        .outputs
        .iter()
        .map(|_| quote! { ::kiln::__private::Tensor<'a> })
        .collect();
    let out_ty = if outs.len() == 1 {
        outs[0].clone()
    } else {
        quote! { (#(#outs),*) }
    };
    quote! {
        #(#attrs)*
        #vis struct #name { _unusable: () }
        #[allow(unused_variables, clippy::all)]
        impl #name {
            pub const ARENA_BYTES: usize = 0;
            pub const ARENA_LOWER_BOUND: usize = 0;
            pub const ARENA_NAIVE_BYTES: usize = 0;
            pub const PARAMS_LEN: usize = 0;
            pub const INPUT_SHAPES: &'static [&'static [usize]] = &[];
            pub const OUTPUT_SHAPES: &'static [&'static [usize]] = &[];
            pub const PLAN: &'static str = "";
            pub fn new() -> Self { ::core::unreachable!() }
            pub fn from_safetensors(bytes: &[u8]) -> ::core::result::Result<Self, ::kiln::__private::Error> { ::core::unreachable!() }
            pub fn set_threads(&mut self, n: usize) -> ::core::result::Result<(), ::kiln::__private::Error> { ::core::unreachable!() }
            pub fn threads(&self) -> usize { ::core::unreachable!() }
            pub fn run<'a, #(#input_tys: ?Sized + ::kiln::__private::AsInput),*>(&'a mut self, #(#user_names: &#input_tys),*) -> ::core::result::Result<#out_ty, ::kiln::__private::Error> { ::core::unreachable!() }
            pub fn run_in<'a, #(#input_tys: ?Sized + ::kiln::__private::AsInput),*>(&self, arena: &'a mut [u8], #(#user_names: &#input_tys),*) -> ::core::result::Result<#out_ty, ::kiln::__private::Error> { ::core::unreachable!() }
        }
    }
}
