//! Parsing: the token stream of an `op!` invocation into the syntax tree
//! below. Names are not resolved and types are not checked here (see
//! `check`); every syntax error is a `syn::Error` at the offending token.

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::parse::{Parse, ParseStream};
use syn::{
    Attribute, Ident, LitFloat, LitInt, Token, Visibility, braced, bracketed, parenthesized,
};

/// The first and last span of a piece of source, so errors cover all of it.
#[derive(Clone, Copy)]
pub struct Spans {
    pub start: Span,
    pub end: Span,
}

impl Spans {
    pub fn one(span: Span) -> Spans {
        Spans {
            start: span,
            end: span,
        }
    }

    pub fn to(self, other: Spans) -> Spans {
        Spans {
            start: self.start,
            end: other.end,
        }
    }

    /// A `syn::Error` covering these spans.
    pub fn error(self, message: impl std::fmt::Display) -> syn::Error {
        let start = Ident::new("start", self.start);
        let end = Ident::new("end", self.end);
        let tokens: TokenStream = quote!(#start #end);
        syn::Error::new_spanned(tokens, message)
    }
}

/// Element types a tensor or expression can have.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    F32,
    F64,
    I32,
    I64,
    Bool,
}

impl DType {
    pub fn from_name(name: &str) -> Option<DType> {
        match name {
            "f32" => Some(DType::F32),
            "f64" => Some(DType::F64),
            "i32" => Some(DType::I32),
            "i64" => Some(DType::I64),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }
}

/// One dimension in a signature, or the extent of an explicit reduction axis.
#[derive(Clone)]
pub enum Dim {
    /// A shape parameter.
    Param(Ident),
    /// A fixed extent.
    Lit(i64),
}

/// `f32[M, K]`
pub struct TensorType {
    pub dtype: DType,
    pub dims: Vec<Dim>,
}

/// `x: f32[M, K]`
pub struct InputDecl {
    pub name: Ident,
    pub ty: TensorType,
}

/// The whole definition.
pub struct OpDef {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub inputs: Vec<InputDecl>,
    pub ret: TensorType,
    pub ret_span: Span,
    pub stmts: Vec<Stmt>,
    pub body_span: Span,
}

/// `y[i, j] = rhs`
pub struct Stmt {
    pub name: Ident,
    pub indices: Vec<Ident>,
    pub lhs_bracket: Span,
    pub rhs: Rhs,
}

/// The right-hand side of a statement.
pub enum Rhs {
    /// `sum(k, l in 0..R) body`
    Reduce {
        op: ReduceOp,
        op_span: Span,
        axes: Vec<AxisDecl>,
        body: Expr,
    },
    /// Any other expression.
    Plain(Expr),
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

/// `k` or `k in 0..R`
pub struct AxisDecl {
    pub name: Ident,
    pub extent: Option<Dim>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
}

impl BinOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    fn precedence(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne => 3,
            BinOp::Add | BinOp::Sub => 4,
            BinOp::Mul | BinOp::Div => 5,
        }
    }
}

/// An expression with the source it came from.
pub struct Expr {
    pub kind: ExprKind,
    pub spans: Spans,
}

pub enum ExprKind {
    /// A float literal, with its suffix type if any.
    Float(f64, Option<DType>),
    /// An integer literal, with its suffix type if any.
    Int(i64, Option<DType>),
    /// An index variable or a shape parameter.
    Name(Ident),
    /// `x[i, k]`
    Read(Ident, Vec<Expr>, Span),
    /// `-a`
    Neg(Box<Expr>),
    /// `!a`
    Not(Box<Expr>),
    /// `a + b`, `a < b`, `a && b`, …
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `if c { a } else { b }` and `select(c, a, b)`
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `exp(a)`, `max(a, b)`, …
    Call(Ident, Vec<Expr>),
    /// `a as f32`
    Cast(Box<Expr>, DType),
}

fn parse_dtype(input: ParseStream) -> syn::Result<(DType, Span)> {
    let ident: Ident = input.parse()?;
    match DType::from_name(&ident.to_string()) {
        Some(d) => Ok((d, ident.span())),
        None => Err(syn::Error::new(
            ident.span(),
            format!("unknown dtype `{ident}`: expected f32, f64, i32 or i64"),
        )),
    }
}

fn parse_dim(input: ParseStream) -> syn::Result<Dim> {
    if input.peek(LitInt) {
        let lit: LitInt = input.parse()?;
        let value: i64 = lit.base10_parse()?;
        if value < 1 {
            return Err(syn::Error::new(lit.span(), "an extent must be at least 1"));
        }
        Ok(Dim::Lit(value))
    } else if input.peek(Ident) {
        Ok(Dim::Param(input.parse()?))
    } else {
        Err(input.error("expected a shape parameter (e.g. `N`) or an integer extent"))
    }
}

fn parse_tensor_type(input: ParseStream) -> syn::Result<TensorType> {
    let (dtype, _) = parse_dtype(input)?;
    let content;
    bracketed!(content in input);
    let dims = content.parse_terminated(parse_dim, Token![,])?;
    Ok(TensorType {
        dtype,
        dims: dims.into_iter().collect(),
    })
}

impl Parse for OpDef {
    fn parse(input: ParseStream) -> syn::Result<OpDef> {
        let attrs = input.call(Attribute::parse_outer)?;
        let vis: Visibility = input.parse()?;
        input.parse::<Token![fn]>()?;
        let name: Ident = input.parse()?;
        let params;
        parenthesized!(params in input);
        let mut inputs = Vec::new();
        while !params.is_empty() {
            let name: Ident = params.parse()?;
            params.parse::<Token![:]>()?;
            let ty = parse_tensor_type(&params)?;
            inputs.push(InputDecl { name, ty });
            if params.is_empty() {
                break;
            }
            params.parse::<Token![,]>()?;
        }
        input.parse::<Token![->]>()?;
        let ret_span = input.span();
        let ret = parse_tensor_type(input)?;
        let body;
        let brace = braced!(body in input);
        let mut stmts = Vec::new();
        while !body.is_empty() {
            stmts.push(parse_stmt(&body)?);
            if body.is_empty() {
                break;
            }
            body.parse::<Token![;]>()?;
        }
        if !input.is_empty() {
            return Err(input.error("expected nothing after the operator's body"));
        }
        Ok(OpDef {
            attrs,
            vis,
            name,
            inputs,
            ret,
            ret_span,
            stmts,
            body_span: brace.span.join(),
        })
    }
}

fn reduce_op(ident: &Ident) -> Option<ReduceOp> {
    match ident.to_string().as_str() {
        "sum" => Some(ReduceOp::Sum),
        "max" => Some(ReduceOp::Max),
        "min" => Some(ReduceOp::Min),
        _ => None,
    }
}

/// Whether the next token can start an operand (not a binary operator).
fn starts_operand(input: ParseStream) -> bool {
    input.peek(Ident)
        || input.peek(LitInt)
        || input.peek(LitFloat)
        || input.peek(syn::token::Paren)
        || input.peek(Token![if])
        || input.peek(Token![!])
}

/// Whether the input starts with `sum(…) operand` (or max/min): a reduction.
fn is_reduction(input: ParseStream) -> bool {
    let fork = input.fork();
    let Ok(ident) = fork.parse::<Ident>() else {
        return false;
    };
    let Some(op) = reduce_op(&ident) else {
        return false;
    };
    if !fork.peek(syn::token::Paren) {
        return false;
    }
    let Ok(group) = fork.parse::<proc_macro2::Group>() else {
        return false;
    };
    let _ = group;
    op == ReduceOp::Sum || starts_operand(&fork)
}

fn parse_axis(input: ParseStream) -> syn::Result<AxisDecl> {
    let name: Ident = input.parse()?;
    let extent = if input.peek(Token![in]) {
        input.parse::<Token![in]>()?;
        let start: LitInt = input.parse()?;
        if start.base10_parse::<i64>()? != 0 {
            return Err(syn::Error::new(
                start.span(),
                "a reduction range must start at 0: write `k in 0..R`",
            ));
        }
        input.parse::<Token![..]>()?;
        Some(parse_dim(input)?)
    } else {
        None
    };
    Ok(AxisDecl { name, extent })
}

fn parse_stmt(input: ParseStream) -> syn::Result<Stmt> {
    let name: Ident = input.parse()?;
    let content;
    let bracket = bracketed!(content in input);
    let indices = content.parse_terminated(Ident::parse, Token![,])?;
    input.parse::<Token![=]>()?;
    let rhs = if is_reduction(input) {
        let op_ident: Ident = input.parse()?;
        let op = reduce_op(&op_ident).unwrap_or(ReduceOp::Sum);
        let axes_content;
        parenthesized!(axes_content in input);
        let axes = axes_content.parse_terminated(parse_axis, Token![,])?;
        if axes.is_empty() {
            return Err(syn::Error::new(
                op_ident.span(),
                format!("`{op_ident}(…)` needs at least one reduction axis"),
            ));
        }
        let body = parse_expr(input, 0)?;
        Rhs::Reduce {
            op,
            op_span: op_ident.span(),
            axes: axes.into_iter().collect(),
            body,
        }
    } else {
        Rhs::Plain(parse_expr(input, 0)?)
    };
    Ok(Stmt {
        name,
        indices: indices.into_iter().collect(),
        lhs_bracket: bracket.span.join(),
        rhs,
    })
}

fn peek_binop(input: ParseStream) -> Option<BinOp> {
    if input.peek(Token![||]) {
        Some(BinOp::Or)
    } else if input.peek(Token![&&]) {
        Some(BinOp::And)
    } else if input.peek(Token![<=]) {
        Some(BinOp::Le)
    } else if input.peek(Token![>=]) {
        Some(BinOp::Ge)
    } else if input.peek(Token![==]) {
        Some(BinOp::Eq)
    } else if input.peek(Token![!=]) {
        Some(BinOp::Ne)
    } else if input.peek(Token![<]) {
        Some(BinOp::Lt)
    } else if input.peek(Token![>]) {
        Some(BinOp::Gt)
    } else if input.peek(Token![+]) {
        Some(BinOp::Add)
    } else if input.peek(Token![-]) {
        Some(BinOp::Sub)
    } else if input.peek(Token![*]) {
        Some(BinOp::Mul)
    } else if input.peek(Token![/]) {
        Some(BinOp::Div)
    } else {
        None
    }
}

fn skip_binop(input: ParseStream, op: BinOp) -> syn::Result<()> {
    match op {
        BinOp::Or => input.parse::<Token![||]>().map(drop),
        BinOp::And => input.parse::<Token![&&]>().map(drop),
        BinOp::Le => input.parse::<Token![<=]>().map(drop),
        BinOp::Ge => input.parse::<Token![>=]>().map(drop),
        BinOp::Eq => input.parse::<Token![==]>().map(drop),
        BinOp::Ne => input.parse::<Token![!=]>().map(drop),
        BinOp::Lt => input.parse::<Token![<]>().map(drop),
        BinOp::Gt => input.parse::<Token![>]>().map(drop),
        BinOp::Add => input.parse::<Token![+]>().map(drop),
        BinOp::Sub => input.parse::<Token![-]>().map(drop),
        BinOp::Mul => input.parse::<Token![*]>().map(drop),
        BinOp::Div => input.parse::<Token![/]>().map(drop),
    }
}

/// Precedence climbing over the binary operators (all left-associative).
pub fn parse_expr(input: ParseStream, min_prec: u8) -> syn::Result<Expr> {
    let mut lhs = parse_cast(input)?;
    while let Some(op) = peek_binop(input) {
        let prec = op.precedence();
        if prec <= min_prec {
            break;
        }
        skip_binop(input, op)?;
        let rhs = parse_expr(input, prec)?;
        let spans = lhs.spans.to(rhs.spans);
        lhs = Expr {
            kind: ExprKind::Binary(op, Box::new(lhs), Box::new(rhs)),
            spans,
        };
    }
    Ok(lhs)
}

/// `unary (as dtype)*`
fn parse_cast(input: ParseStream) -> syn::Result<Expr> {
    let mut expr = parse_unary(input)?;
    while input.peek(Token![as]) {
        input.parse::<Token![as]>()?;
        let (dtype, span) = parse_dtype(input)?;
        let spans = expr.spans.to(Spans::one(span));
        expr = Expr {
            kind: ExprKind::Cast(Box::new(expr), dtype),
            spans,
        };
    }
    Ok(expr)
}

fn parse_unary(input: ParseStream) -> syn::Result<Expr> {
    if input.peek(Token![-]) {
        let minus: Token![-] = input.parse()?;
        let operand = parse_unary(input)?;
        let spans = Spans::one(minus.span).to(operand.spans);
        let kind = match operand.kind {
            ExprKind::Float(v, d) => ExprKind::Float(-v, d),
            ExprKind::Int(v, d) => ExprKind::Int(-v, d),
            kind => ExprKind::Neg(Box::new(Expr {
                kind,
                spans: operand.spans,
            })),
        };
        return Ok(Expr { kind, spans });
    }
    if input.peek(Token![!]) {
        let bang: Token![!] = input.parse()?;
        let operand = parse_unary(input)?;
        let spans = Spans::one(bang.span).to(operand.spans);
        return Ok(Expr {
            kind: ExprKind::Not(Box::new(operand)),
            spans,
        });
    }
    parse_primary(input)
}

fn literal_suffix(suffix: &str, span: Span) -> syn::Result<Option<DType>> {
    if suffix.is_empty() {
        return Ok(None);
    }
    DType::from_name(suffix).map(Some).ok_or_else(|| {
        syn::Error::new(
            span,
            format!("unsupported literal suffix `{suffix}`: use f32, f64, i32 or i64"),
        )
    })
}

fn parse_block(input: ParseStream) -> syn::Result<Expr> {
    let content;
    braced!(content in input);
    let expr = parse_expr(&content, 0)?;
    if !content.is_empty() {
        return Err(content.error("expected `}` after the branch's value"));
    }
    Ok(expr)
}

fn parse_if(input: ParseStream) -> syn::Result<Expr> {
    let if_token: Token![if] = input.parse()?;
    let cond = parse_expr(input, 0)?;
    let then = parse_block(input)?;
    if !input.peek(Token![else]) {
        return Err(input.error("`if` needs an `else` branch: every element needs a value"));
    }
    input.parse::<Token![else]>()?;
    let otherwise = if input.peek(Token![if]) {
        parse_if(input)?
    } else {
        parse_block(input)?
    };
    let spans = Spans::one(if_token.span).to(otherwise.spans);
    Ok(Expr {
        kind: ExprKind::Select(Box::new(cond), Box::new(then), Box::new(otherwise)),
        spans,
    })
}

fn parse_primary(input: ParseStream) -> syn::Result<Expr> {
    if input.peek(LitFloat) {
        let lit: LitFloat = input.parse()?;
        let value: f64 = lit.base10_parse()?;
        let suffix = literal_suffix(lit.suffix(), lit.span())?;
        if suffix.is_some_and(|d| !d.is_float()) {
            return Err(syn::Error::new(
                lit.span(),
                "a float literal needs a float type",
            ));
        }
        return Ok(Expr {
            kind: ExprKind::Float(value, suffix),
            spans: Spans::one(lit.span()),
        });
    }
    if input.peek(LitInt) {
        let lit: LitInt = input.parse()?;
        let suffix = literal_suffix(lit.suffix(), lit.span())?;
        let spans = Spans::one(lit.span());
        if suffix.is_some_and(DType::is_float) {
            let value: f64 = lit.base10_parse()?;
            return Ok(Expr {
                kind: ExprKind::Float(value, suffix),
                spans,
            });
        }
        let value: i64 = lit.base10_parse()?;
        return Ok(Expr {
            kind: ExprKind::Int(value, suffix),
            spans,
        });
    }
    if input.peek(syn::token::Paren) {
        let content;
        parenthesized!(content in input);
        let expr = parse_expr(&content, 0)?;
        if !content.is_empty() {
            return Err(content.error("expected `)`"));
        }
        return Ok(expr);
    }
    if input.peek(Token![if]) {
        return parse_if(input);
    }
    if is_reduction(input) {
        let ident: Ident = input.fork().parse()?;
        return Err(syn::Error::new(
            ident.span(),
            format!(
                "`{ident}(…)` reduces over axes only as the whole right-hand side of a statement: \
                 put it in a stage of its own, e.g. `t[i] = {ident}(k) …;`"
            ),
        ));
    }
    if input.peek(Ident) {
        let ident: Ident = input.parse()?;
        if input.peek(syn::token::Bracket) {
            let content;
            let bracket = bracketed!(content in input);
            let indices = content.parse_terminated(|i| parse_expr(i, 0), Token![,])?;
            let spans = Spans::one(ident.span()).to(Spans::one(bracket.span.close()));
            return Ok(Expr {
                kind: ExprKind::Read(ident, indices.into_iter().collect(), bracket.span.join()),
                spans,
            });
        }
        if input.peek(syn::token::Paren) {
            let content;
            let paren = parenthesized!(content in input);
            let args = content.parse_terminated(|i| parse_expr(i, 0), Token![,])?;
            let spans = Spans::one(ident.span()).to(Spans::one(paren.span.close()));
            let args: Vec<Expr> = args.into_iter().collect();
            if ident == "select" {
                let mut it = args.into_iter();
                return match (it.next(), it.next(), it.next(), it.next()) {
                    (Some(c), Some(a), Some(b), None) => Ok(Expr {
                        kind: ExprKind::Select(Box::new(c), Box::new(a), Box::new(b)),
                        spans,
                    }),
                    _ => Err(spans.error("`select` takes 3 arguments: select(cond, then, else)")),
                };
            }
            return Ok(Expr {
                kind: ExprKind::Call(ident, args),
                spans,
            });
        }
        let spans = Spans::one(ident.span());
        return Ok(Expr {
            kind: ExprKind::Name(ident),
            spans,
        });
    }
    Err(input.error(
        "expected an expression: a tensor read `x[i]`, an index, a literal, `if`, or a call",
    ))
}
