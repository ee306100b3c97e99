//! The surface syntax of the `network!` DSL: an AST that keeps the span of every token a
//! diagnostic may point at, and its `syn` parser.
//!
//! ```text
//! network  := attr* vis 'net' Ident '(' (Ident ':' type),* ')' '->' (type | '(' type,* ')')
//!             where? block
//! where    := 'where' (Ident | '(' Ident,* ')') 'in' '[' (sizes | '(' LitInt,* ')'),* ']'
//!             (`sizes` is a number or a dlnn literal like `224x224`)
//! block    := '{' stmt* expr '}'
//! stmt     := 'weights' LitStr ';' | 'let' (Ident | '(' Ident,* ')') '=' expr ';'
//! expr     := atom ('.' Ident '(' args ')')*
//! atom     := Ident '(' args ')' | Ident | '(' expr (',' expr)* ')'
//! arg      := Ident ':' paramtype | Ident '=' value | value
//! value    := expr | LitInt | LitFloat | '-' lit | '(' value,* ')' | '[' ('-'? LitInt),* ']'
//!           | type | LitStr
//! type     := ('fm' | 'vec') '<' C 'x' dtype ('[' H ',' W ']')? (',' 'batch' '=' N)? '>'
//!           | 'tensor' '<' dtype '[' (LitInt | Ident | '?'),* ']' '>'
//! paramtype:= 'weights' '<' In '->' (KhxKwxdtype '->')? Out '>' | 'norm' '<' C 'x' dtype '>'
//!           | 'tensor' '<' ... '>'
//! ```
//!
//! The dlnn type notation tokenizes as Rust literals with suffixes: `3xf32` is the integer `3`
//! with suffix `xf32`, and `3x3xf32` is `3` with suffix `x3xf32`. [`dims`] splits them.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{braced, bracketed, parenthesized, Attribute, Ident, LitFloat, LitInt, LitStr, Token};

mod kw {
    syn::custom_keyword!(net);
    syn::custom_keyword!(weights);
    syn::custom_keyword!(batch);
}

/// One `network!` invocation.
#[derive(Debug)]
pub struct NetworkDef {
    pub attrs: Vec<Attribute>,
    pub vis: syn::Visibility,
    pub name: Ident,
    pub inputs: Vec<InputDecl>,
    pub outputs: Vec<TypeExpr>,
    /// `where (h, w) in [(224, 224), (320, 320)]`: the shapes to precompile.
    pub variants: Option<WhereClause>,
    pub body: Body,
}

/// The size symbols and the values to compile them for, one entry per variant.
#[derive(Debug)]
pub struct WhereClause {
    pub names: Vec<Ident>,
    /// Each variant's sizes, in the order of `names`, with the span of the entry.
    pub values: Vec<(Vec<Num>, Span)>,
    pub span: Span,
}

impl Parse for WhereClause {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let kw = input.parse::<Token![where]>()?;
        let names = if input.peek(syn::token::Paren) {
            let content;
            parenthesized!(content in input);
            Punctuated::<Ident, Token![,]>::parse_terminated(&content)?
                .into_iter()
                .collect()
        } else {
            vec![input.parse()?]
        };
        input.parse::<Token![in]>()?;
        let content;
        bracketed!(content in input);
        let mut values = Vec::new();
        while !content.is_empty() {
            if content.peek(syn::token::Paren) {
                let inner;
                let paren = parenthesized!(inner in content);
                let mut nums = Vec::new();
                for lit in Punctuated::<LitInt, Token![,]>::parse_terminated(&inner)? {
                    nums.push(Num {
                        value: lit.base10_parse()?,
                        span: lit.span(),
                    });
                }
                values.push((nums, paren.span.join()));
            } else {
                let lit: LitInt = content.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "expected sizes like `224`, `224x224` or `(224, 224)`",
                    )
                })?;
                let (nums, dtype) = dims(&lit)?;
                if let Some(d) = dtype {
                    return Err(syn::Error::new(d.span, "expected sizes, not a type"));
                }
                values.push((nums, lit.span()));
            }
            if content.is_empty() {
                break;
            }
            content.parse::<Token![,]>()?;
        }
        Ok(WhereClause {
            names,
            values,
            span: kw.span,
        })
    }
}

#[derive(Debug)]
pub struct InputDecl {
    pub name: Ident,
    pub ty: TypeExpr,
}

/// `fm<3xf32[224,224]>` or `vec<10xf32>`, optionally `, batch = N`; or
/// `tensor<f32[2, n, ?]>` (then `channels` is unused and `dims` holds the sizes).
#[derive(Debug, Clone)]
pub struct TypeExpr {
    pub kind: TypeKind,
    /// dlnn's layout map, `(H,W,C)[N] -> (N,C,H,W)`: how the caller's buffer is laid out.
    pub layout: Option<LayoutMap>,
    pub dims: Vec<SizeExpr>,
    pub channels: Num,
    pub dtype: Dtype,
    pub spatial: Option<Vec<Num>>,
    pub batch: Option<Num>,
    /// `seq<...>` around it: a sequence of tensors of this type.
    pub seq: bool,
    /// `seq<..., N>`: the length of a sequence input.
    pub seq_len: Option<Num>,
    /// The first token (`fm`/`vec`) and the last (`>`): errors about the whole type underline
    /// the range (`Span::join` is not available to proc macros on stable).
    pub span: Span,
    pub end: Span,
}

impl TypeExpr {
    pub fn error(&self, msg: impl std::fmt::Display) -> syn::Error {
        error_range(self.span, self.end, msg)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeKind {
    Fm,
    Vec,
    Tensor,
}

/// `(W,H,C)[N] -> (N,C,H,W)`: the axes of the caller's buffer, outermost first (the batch in
/// brackets, outermost of all), mapped onto the type's own axes.
#[derive(Debug, Clone)]
pub struct LayoutMap {
    pub from: Vec<Ident>,
    pub batch: Option<Ident>,
    pub to: Vec<Ident>,
    pub span: Span,
}

impl Parse for LayoutMap {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let idents = |input: ParseStream| -> syn::Result<(Vec<Ident>, Span)> {
            let content;
            let paren = parenthesized!(content in input);
            let items = Punctuated::<Ident, Token![,]>::parse_terminated(&content)?;
            Ok((items.into_iter().collect(), paren.span.join()))
        };
        let (from, span) = idents(input)?;
        let batch = if input.peek(syn::token::Bracket) {
            let content;
            bracketed!(content in input);
            Some(content.parse()?)
        } else {
            None
        };
        input.parse::<Token![->]>()?;
        let (to, _) = idents(input)?;
        Ok(LayoutMap {
            from,
            batch,
            to,
            span,
        })
    }
}

/// One size of a `tensor<...>` type: a number, a named symbol, or `?` (any size).
#[derive(Debug, Clone)]
pub enum SizeExpr {
    Num(Num),
    Sym(Ident),
    Any(Span),
}

/// A number the user wrote, with the span of its token.
#[derive(Debug, Clone, Copy)]
pub struct Num {
    pub value: usize,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub struct Dtype {
    pub name: String,
    pub span: Span,
}

#[derive(Debug)]
pub struct Body {
    pub stmts: Vec<Stmt>,
    pub result: Expr,
}

#[derive(Debug)]
pub enum Stmt {
    Weights(LitStr),
    /// `let name = ...` (one name) or `let (a, b) = ...` (an op with several results).
    Let {
        names: Vec<Ident>,
        value: Expr,
    },
}

#[derive(Debug, Clone)]
pub enum Expr {
    /// `op(args)`, or `recv.op(args)` with the receiver as the first argument.
    Call {
        op: Ident,
        args: Vec<Arg>,
    },
    Name(Ident),
    Tuple(Vec<Expr>, Span),
    /// `wq: tensor<f32[16,16]>` in argument position: a parameter tensor used as a value.
    Param {
        name: ParamName,
        ty: Box<TypeExpr>,
    },
}

#[derive(Debug, Clone)]
pub enum Arg {
    /// `name: weights<...>` declares a parameter tensor (group) read from the weights file.
    Param {
        name: ParamName,
        ty: ParamType,
    },
    Named {
        name: Ident,
        value: Value,
    },
    Positional(Value),
}

/// The name of a parameter: an identifier, or a string for keys that are not identifiers
/// (`"layer1.0.conv1"`).
#[derive(Debug, Clone)]
pub struct ParamName {
    pub key: String,
    pub span: Span,
}

#[derive(Debug, Clone)]
pub enum ParamType {
    /// `weights<In -> KhxKwxdtype -> Out>` (conv) or `weights<In -> Out>` (dense).
    Weights {
        c_in: Num,
        kernel: Option<(Vec<Num>, Dtype)>,
        c_out: Num,
        span: Span,
        end: Span,
    },
    /// `norm<Cxdtype>`: batch-norm statistics.
    Norm {
        channels: Num,
        dtype: Dtype,
        span: Span,
        end: Span,
    },
    /// `tensor<dtype[dims]>`: one tensor under the parameter's own name.
    Tensor(TypeExpr),
}

impl ParamType {
    pub fn span(&self) -> Span {
        match self {
            ParamType::Weights { span, .. } | ParamType::Norm { span, .. } => *span,
            ParamType::Tensor(t) => t.span,
        }
    }
    pub fn end(&self) -> Span {
        match self {
            ParamType::Weights { end, .. } | ParamType::Norm { end, .. } => *end,
            ParamType::Tensor(t) => t.end,
        }
    }
}

// With proc-macro2's `span-locations` (the build driver's feature) spans are larger and
// `Type` outgrows the other variants; boxing it would touch every reader for a parse-time value.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Value {
    Expr(Expr),
    Int(Num),
    /// A literal with an `x` suffix: `2x2`, `3x3`.
    Dims(Vec<Num>, Span),
    Float(f64, Span),
    Tuple(Vec<Value>, Span),
    /// `[1, -1, 8]`: a list of whole numbers (axes, a permutation, sizes).
    List(Vec<i64>, Span),
    Type(TypeExpr),
}

impl Value {
    pub fn span(&self) -> Span {
        match self {
            Value::Expr(e) => e.span(),
            Value::Int(n) => n.span,
            Value::Dims(_, s) | Value::Float(_, s) | Value::Tuple(_, s) | Value::List(_, s) => *s,
            Value::Type(t) => t.span,
        }
    }
}

impl Expr {
    pub fn span(&self) -> Span {
        match self {
            Expr::Call { op, .. } => op.span(),
            Expr::Name(i) => i.span(),
            Expr::Tuple(_, s) => *s,
            Expr::Param { name, .. } => name.span,
        }
    }
}

impl Parse for NetworkDef {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: syn::Visibility = input.parse()?;
        input.parse::<kw::net>().map_err(|e| {
            syn::Error::new(e.span(), "expected `net Name(inputs) -> outputs { ... }`")
        })?;
        let name: Ident = input.parse()?;
        let content;
        parenthesized!(content in input);
        let inputs = Punctuated::<InputDecl, Token![,]>::parse_terminated(&content)?
            .into_iter()
            .collect();
        input.parse::<Token![->]>()?;
        let outputs = if input.peek(syn::token::Paren) {
            let content;
            parenthesized!(content in input);
            Punctuated::<TypeExpr, Token![,]>::parse_terminated(&content)?
                .into_iter()
                .collect()
        } else {
            vec![input.parse()?]
        };
        let variants = if input.peek(Token![where]) {
            Some(input.parse()?)
        } else {
            None
        };
        let body;
        braced!(body in input);
        let body = body.parse()?;
        if !input.is_empty() {
            return Err(input.error("expected one network per `network!` invocation"));
        }
        Ok(NetworkDef {
            attrs,
            vis,
            name,
            inputs,
            outputs,
            variants,
            body,
        })
    }
}

impl Parse for InputDecl {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty = input.parse()?;
        Ok(InputDecl { name, ty })
    }
}

impl Parse for Body {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut stmts = Vec::new();
        let mut last_let = None;
        loop {
            if input.peek(kw::weights) && input.peek2(LitStr) {
                input.parse::<kw::weights>()?;
                stmts.push(Stmt::Weights(input.parse()?));
                input.parse::<Token![;]>()?;
            } else if input.peek(Token![let]) {
                let let_token = input.parse::<Token![let]>()?;
                last_let = Some(let_token.span);
                let names = if input.peek(syn::token::Paren) {
                    let content;
                    parenthesized!(content in input);
                    Punctuated::<Ident, Token![,]>::parse_terminated(&content)?
                        .into_iter()
                        .collect()
                } else {
                    vec![input.parse()?]
                };
                input.parse::<Token![=]>()?;
                let value = input.parse()?;
                input.parse::<Token![;]>()?;
                stmts.push(Stmt::Let { names, value });
            } else {
                break;
            }
        }
        if input.is_empty() {
            let msg = "a network ends with its result expression, without `;` (like the last expression of a Rust block)";
            return Err(match last_let {
                Some(span) => syn::Error::new(span, format!("{msg}; this `let` is the last line")),
                None => input.error(msg),
            });
        }
        let result = input.parse()?;
        if !input.is_empty() {
            return Err(input.error(
                "expected the end of the network: the result expression comes last, without `;`",
            ));
        }
        Ok(Body { stmts, result })
    }
}

/// How deeply expressions and values may nest: calls inside calls, links of a method chain,
/// tuples, signs. Parsing, lowering and dropping the AST all recurse on this depth, and running
/// out of stack aborts rustc instead of reporting an error. At this depth every pass fits in a
/// 2 MiB thread stack even unoptimised (rustc runs proc macros on 8 MiB). A call nested in a call
/// costs two levels (its argument and its expression), a chained `.op()` one.
pub const MAX_DEPTH: usize = 128;

thread_local! {
    /// Nesting levels held by the [`Depth`] guards of the parse in progress.
    static DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// One parse function's share of [`DEPTH`], given back when it returns (or fails).
struct Depth(usize);

impl Depth {
    fn enter(input: ParseStream) -> syn::Result<Depth> {
        let mut d = Depth(0);
        d.add(input)?;
        Ok(d)
    }
    fn add(&mut self, input: ParseStream) -> syn::Result<()> {
        let depth = DEPTH.get() + 1;
        if depth > MAX_DEPTH {
            return Err(input.error(format!(
                "this expression nests too deeply (more than {MAX_DEPTH} levels of calls, chained calls and tuples); split it with `let`"
            )));
        }
        DEPTH.set(depth);
        self.0 += 1;
        Ok(())
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        DEPTH.set(DEPTH.get().saturating_sub(self.0));
    }
}

impl Parse for Expr {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut depth = Depth::enter(input)?;
        let mut expr = if input.peek(syn::token::Paren) {
            let content;
            let paren = parenthesized!(content in input);
            let items: Vec<Expr> = Punctuated::<Expr, Token![,]>::parse_terminated(&content)?
                .into_iter()
                .collect();
            match <[Expr; 1]>::try_from(items) {
                Ok([one]) => one,
                Err(items) => Expr::Tuple(items, paren.span.join()),
            }
        } else {
            let name: Ident = input.call(syn::ext::IdentExt::parse_any)?;
            if input.peek(syn::token::Paren) {
                Expr::Call {
                    op: name,
                    args: parse_args(input)?,
                }
            } else {
                Expr::Name(name)
            }
        };
        while input.peek(Token![.]) {
            // Each link nests the chain so far one level deeper in the AST.
            depth.add(input)?;
            input.parse::<Token![.]>()?;
            let op: Ident = input.call(syn::ext::IdentExt::parse_any)?;
            let mut args = vec![Arg::Positional(Value::Expr(expr))];
            args.extend(parse_args(input)?);
            expr = Expr::Call { op, args };
        }
        Ok(expr)
    }
}

fn parse_args(input: ParseStream) -> syn::Result<Vec<Arg>> {
    let content;
    parenthesized!(content in input);
    Ok(Punctuated::<Arg, Token![,]>::parse_terminated(&content)?
        .into_iter()
        .collect())
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let is_name = input.peek(Ident) || input.peek(LitStr);
        if is_name && input.peek2(Token![:]) && !input.peek2(Token![::]) {
            let name = if input.peek(LitStr) {
                let lit: LitStr = input.parse()?;
                ParamName {
                    key: lit.value(),
                    span: lit.span(),
                }
            } else {
                let ident: Ident = input.parse()?;
                ParamName {
                    key: ident.to_string(),
                    span: ident.span(),
                }
            };
            input.parse::<Token![:]>()?;
            return Ok(match input.parse()? {
                ParamType::Tensor(ty) => Arg::Positional(Value::Expr(Expr::Param {
                    name,
                    ty: Box::new(ty),
                })),
                ty => Arg::Param { name, ty },
            });
        }
        if input.peek(Ident) && input.peek2(Token![=]) && !input.peek2(Token![==]) {
            let name = input.parse()?;
            input.parse::<Token![=]>()?;
            return Ok(Arg::Named {
                name,
                value: input.parse()?,
            });
        }
        Ok(Arg::Positional(input.parse()?))
    }
}

impl Parse for Value {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let _depth = Depth::enter(input)?;
        if input.peek(Token![-]) {
            let minus = input.parse::<Token![-]>()?;
            return match input.parse::<Value>()? {
                Value::Float(f, span) => Ok(Value::Float(-f, join(minus.span, span))),
                Value::Int(n) => Ok(Value::Float(-(n.value as f64), join(minus.span, n.span))),
                other => Err(syn::Error::new(other.span(), "expected a number after `-`")),
            };
        }
        if input.peek(LitFloat) {
            let lit: LitFloat = input.parse()?;
            if !lit.suffix().is_empty() {
                return Err(syn::Error::new(lit.span(), "expected a plain number"));
            }
            return Ok(Value::Float(lit.base10_parse()?, lit.span()));
        }
        if input.peek(LitInt) {
            let lit: LitInt = input.parse()?;
            let (nums, dtype) = dims(&lit)?;
            if let Some(dtype) = dtype {
                return Err(syn::Error::new(
                    dtype.span,
                    "expected a number or sizes like `3x3` here, not a type",
                ));
            }
            return Ok(match <[Num; 1]>::try_from(nums) {
                Ok([n]) => Value::Int(n),
                Err(nums) => Value::Dims(nums, lit.span()),
            });
        }
        if input.peek(syn::token::Paren) {
            // A parenthesised list of values, or a parenthesised expression.
            let fork = input.fork();
            let content;
            let paren = parenthesized!(content in fork);
            if content.peek(LitInt) || content.peek(LitFloat) || content.peek(Token![-]) {
                let content;
                parenthesized!(content in input);
                let items = Punctuated::<Value, Token![,]>::parse_terminated(&content)?;
                return Ok(Value::Tuple(items.into_iter().collect(), paren.span.join()));
            }
        }
        if input.peek(syn::token::Bracket) {
            let content;
            let bracket = bracketed!(content in input);
            let mut items = Vec::new();
            while !content.is_empty() {
                let negative = content.parse::<Option<Token![-]>>()?.is_some();
                let lit: LitInt = content.parse().map_err(|e| {
                    syn::Error::new(
                        e.span(),
                        "expected a list of whole numbers, like `[0, 2, 1]`",
                    )
                })?;
                if !lit.suffix().is_empty() {
                    return Err(syn::Error::new(lit.span(), "expected a plain whole number"));
                }
                let n: i64 = lit.base10_parse()?;
                items.push(if negative { -n } else { n });
                if content.is_empty() {
                    break;
                }
                content.parse::<Token![,]>()?;
            }
            return Ok(Value::List(items, bracket.span.join()));
        }
        if (input.peek(Ident) && input.peek2(Token![<]))
            && (input.fork().parse::<TypeExpr>().is_ok())
        {
            return Ok(Value::Type(input.parse()?));
        }
        Ok(Value::Expr(input.parse()?))
    }
}

impl Parse for TypeExpr {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let head: Ident = input.parse()?;
        let kind = match head.to_string().as_str() {
            "seq" => {
                input.parse::<Token![<]>()?;
                let mut inner: TypeExpr = input.parse()?;
                if inner.seq {
                    return Err(inner.error("sequences do not nest"));
                }
                if input.peek(Token![,]) {
                    input.parse::<Token![,]>()?;
                    let lit: LitInt = input.parse()?;
                    inner.seq_len = Some(Num {
                        value: lit.base10_parse()?,
                        span: lit.span(),
                    });
                }
                let close = input.parse::<Token![>]>()?;
                inner.seq = true;
                inner.span = head.span();
                inner.end = close.span;
                return Ok(inner);
            }
            "fm" => TypeKind::Fm,
            "vec" => TypeKind::Vec,
            "tensor" => return parse_tensor_type(head, input),
            _ => {
                return Err(syn::Error::new(
                    head.span(),
                    format!("unknown type `{head}`: expected a feature map `fm<3xf32[224,224]>`, a vector `vec<10xf32>` or a tensor `tensor<f32[2,3]>`"),
                ))
            }
        };
        input.parse::<Token![<]>()?;
        let lit: LitInt = input
            .parse()
            .map_err(|e| syn::Error::new(e.span(), "expected channels and dtype, like `3xf32`"))?;
        let (nums, dtype) = dims(&lit)?;
        let (channels, dtype) = match (nums.as_slice(), dtype) {
            ([c], Some(d)) => (*c, d),
            _ => {
                return Err(syn::Error::new(
                    lit.span(),
                    "expected channels and dtype, like `3xf32`",
                ))
            }
        };
        let spatial = if input.peek(syn::token::Bracket) {
            let content;
            bracketed!(content in input);
            let sizes = Punctuated::<LitInt, Token![,]>::parse_terminated(&content)?;
            let mut out = Vec::new();
            for lit in sizes {
                out.push(Num {
                    value: lit.base10_parse()?,
                    span: lit.span(),
                });
            }
            Some(out)
        } else {
            None
        };
        let mut batch = None;
        let mut layout = None;
        while input.peek(Token![,]) {
            input.parse::<Token![,]>()?;
            if input.peek(syn::token::Paren) {
                layout = Some(input.parse()?);
                continue;
            }
            input.parse::<kw::batch>()?;
            input.parse::<Token![=]>()?;
            let lit: LitInt = input.parse()?;
            batch = Some(Num {
                value: lit.base10_parse()?,
                span: lit.span(),
            });
        }
        let close = input.parse::<Token![>]>()?;
        Ok(TypeExpr {
            seq: false,
            seq_len: None,
            kind,
            layout,
            dims: Vec::new(),
            channels,
            dtype,
            spatial,
            batch,
            span: head.span(),
            end: close.span,
        })
    }
}

impl Parse for ParamType {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let head: Ident = input.parse()?;
        match head.to_string().as_str() {
            "weights" => {
                input.parse::<Token![<]>()?;
                let first: LitInt = input.parse()?;
                let c_in = single(&first)?;
                input.parse::<Token![->]>()?;
                let second: LitInt = input.parse()?;
                let (kernel, c_out) = if input.peek(Token![->]) {
                    input.parse::<Token![->]>()?;
                    let (nums, dtype) = dims(&second)?;
                    let Some(dtype) = dtype else {
                        return Err(syn::Error::new(
                            second.span(),
                            "expected kernel sizes and dtype, like `3x3xf32`",
                        ));
                    };
                    let third: LitInt = input.parse()?;
                    (Some((nums, dtype)), single(&third)?)
                } else {
                    (None, single(&second)?)
                };
                let close = input.parse::<Token![>]>()?;
                Ok(ParamType::Weights {
                    c_in,
                    kernel,
                    c_out,
                    span: head.span(),
                    end: close.span,
                })
            }
            "norm" => {
                input.parse::<Token![<]>()?;
                let lit: LitInt = input.parse()?;
                let (nums, dtype) = dims(&lit)?;
                let (channels, dtype) = match (nums.as_slice(), dtype) {
                    ([c], Some(d)) => (*c, d),
                    _ => {
                        return Err(syn::Error::new(
                            lit.span(),
                            "expected channels and dtype, like `16xf32`",
                        ))
                    }
                };
                let close = input.parse::<Token![>]>()?;
                Ok(ParamType::Norm {
                    channels,
                    dtype,
                    span: head.span(),
                    end: close.span,
                })
            }
            "tensor" => Ok(ParamType::Tensor(parse_tensor_type(head, input)?)),
            _ => Err(syn::Error::new(
                head.span(),
                format!("unknown parameter type `{head}`: expected `weights<In -> KhxKwxf32 -> Out>`, `weights<In -> Out>`, `norm<Cxf32>` or `tensor<f32[...]>`"),
            )),
        }
    }
}

/// The rest of `tensor<dtype[d0, d1, ...]>` after `tensor`: each size a number, a symbol or `?`.
fn parse_tensor_type(head: Ident, input: ParseStream) -> syn::Result<TypeExpr> {
    input.parse::<Token![<]>()?;
    let dtype: Ident = input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), "expected a dtype, like `tensor<f32[2,3]>`"))?;
    let content;
    bracketed!(content in input);
    let mut dims = Vec::new();
    while !content.is_empty() {
        if content.peek(Token![?]) {
            let q = content.parse::<Token![?]>()?;
            dims.push(SizeExpr::Any(q.span));
        } else if content.peek(Ident) {
            dims.push(SizeExpr::Sym(content.parse()?));
        } else {
            let lit: LitInt = content.parse().map_err(|e| {
                syn::Error::new(e.span(), "expected a size: a number, a name or `?`")
            })?;
            if !lit.suffix().is_empty() {
                return Err(syn::Error::new(lit.span(), "expected a plain size"));
            }
            dims.push(SizeExpr::Num(Num {
                value: lit.base10_parse()?,
                span: lit.span(),
            }));
        }
        if content.is_empty() {
            break;
        }
        content.parse::<Token![,]>()?;
    }
    let close = input.parse::<Token![>]>()?;
    Ok(TypeExpr {
        seq: false,
        seq_len: None,
        kind: TypeKind::Tensor,
        layout: None,
        dims,
        channels: Num {
            value: 0,
            span: head.span(),
        },
        dtype: Dtype {
            name: dtype.to_string(),
            span: dtype.span(),
        },
        spatial: None,
        batch: None,
        span: head.span(),
        end: close.span,
    })
}

/// Splits a dlnn literal: `3x3xf32` -> ([3, 3], Some(f32)), `2x2` -> ([2, 2], None),
/// `16xf32` -> ([16], Some(f32)), `7` -> ([7], None).
pub fn dims(lit: &LitInt) -> syn::Result<(Vec<Num>, Option<Dtype>)> {
    let span = lit.span();
    let bad = || {
        syn::Error::new(
            span,
            format!("cannot read `{lit}`: expected sizes and an optional dtype like `3x3xf32`"),
        )
    };
    let first: usize = lit.base10_digits().parse().map_err(|_| bad())?;
    let mut nums = vec![Num { value: first, span }];
    let suffix = lit.suffix();
    if suffix.is_empty() {
        return Ok((nums, None));
    }
    let rest = suffix.strip_prefix('x').ok_or_else(bad)?;
    let mut dtype = None;
    let parts: Vec<&str> = rest.split('x').collect();
    for (i, part) in parts.iter().enumerate() {
        if let Ok(n) = part.parse::<usize>() {
            nums.push(Num { value: n, span });
        } else if i == parts.len() - 1 && !part.is_empty() {
            dtype = Some(Dtype {
                name: (*part).to_string(),
                span,
            });
        } else {
            return Err(bad());
        }
    }
    Ok((nums, dtype))
}

fn single(lit: &LitInt) -> syn::Result<Num> {
    match dims(lit)? {
        (nums, None) if nums.len() == 1 => Ok(nums[0]),
        _ => Err(syn::Error::new(
            lit.span(),
            format!("expected a channel count, found `{lit}`"),
        )),
    }
}

/// An error underlining the tokens from `start` to `end`. `syn::Error::new_spanned` records the
/// first and last span of what it is given, which works on stable where `Span::join` does not.
pub fn error_range(start: Span, end: Span, msg: impl std::fmt::Display) -> syn::Error {
    let tokens: proc_macro2::TokenStream = [
        proc_macro2::TokenTree::Ident(Ident::new("start", start)),
        proc_macro2::TokenTree::Ident(Ident::new("end", end)),
    ]
    .into_iter()
    .collect();
    syn::Error::new_spanned(tokens, msg)
}

/// Joins two spans where the compiler can (on stable it keeps the first otherwise).
pub fn join(a: Span, b: Span) -> Span {
    a.join(b).unwrap_or(a)
}
