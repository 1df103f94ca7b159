//! Checking: resolves names (tensors, index variables, shape parameters),
//! infers every extent and dtype, and reports each mistake as a spanned
//! `syn::Error`. The result is what `expand` turns into te builder calls.

use syn::Ident;

use crate::parse::{BinOp, DType, Dim, Expr, ExprKind, OpDef, ReduceOp, Rhs, Spans, Stmt};

/// An extent: a shape parameter (by position in `params`) or a fixed value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    Param(usize),
    Lit(i64),
}

/// A tensor: an input (by argument position) or an earlier stage.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum TensorRef {
    Input(usize),
    Stage(usize),
}

/// An index variable of the current statement.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum VarRef {
    Spatial(usize),
    Reduce(usize),
}

/// Math functions callable by name.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Intrinsic {
    Exp,
    Log,
    Sqrt,
    Tanh,
    Sigmoid,
    Erf,
    Abs,
    Pow,
    Max,
    Min,
}

impl Intrinsic {
    fn from_name(name: &str) -> Option<Intrinsic> {
        Some(match name {
            "exp" => Intrinsic::Exp,
            "log" => Intrinsic::Log,
            "sqrt" => Intrinsic::Sqrt,
            "tanh" => Intrinsic::Tanh,
            "sigmoid" => Intrinsic::Sigmoid,
            "erf" => Intrinsic::Erf,
            "abs" => Intrinsic::Abs,
            "pow" => Intrinsic::Pow,
            "max" => Intrinsic::Max,
            "min" => Intrinsic::Min,
            _ => return None,
        })
    }

    fn arity(self) -> usize {
        match self {
            Intrinsic::Pow | Intrinsic::Max | Intrinsic::Min => 2,
            _ => 1,
        }
    }
}

/// The type of an expression while checking: a dtype, or a literal whose
/// dtype adapts to what it is combined with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ty {
    D(DType),
    FloatLit,
    IntLit,
}

impl Ty {
    fn describe(self) -> &'static str {
        match self {
            Ty::D(d) => d.name(),
            Ty::FloatLit => "a float literal",
            Ty::IntLit => "an integer literal",
        }
    }

    fn default_dtype(self) -> DType {
        match self {
            Ty::D(d) => d,
            Ty::FloatLit => DType::F32,
            Ty::IntLit => DType::I64,
        }
    }
}

/// A checked expression; after `settle`, `ty` is always a dtype.
pub struct TExpr {
    pub kind: TKind,
    pub ty: Ty,
    pub spans: Spans,
}

pub enum TKind {
    Float(f64),
    Int(i64),
    Var(VarRef),
    Param(usize),
    Read(TensorRef, Vec<TExpr>),
    Neg(Box<TExpr>),
    Not(Box<TExpr>),
    Binary(BinOp, Box<TExpr>, Box<TExpr>),
    Select(Box<TExpr>, Box<TExpr>, Box<TExpr>),
    Call(Intrinsic, Vec<TExpr>),
    Cast(Box<TExpr>, DType),
}

impl TExpr {
    /// The dtype (literals settled to their defaults if still open).
    pub fn dtype(&self) -> DType {
        self.ty.default_dtype()
    }

    fn children(&self) -> Vec<&TExpr> {
        match &self.kind {
            TKind::Float(_) | TKind::Int(_) | TKind::Var(_) | TKind::Param(_) => vec![],
            TKind::Read(_, args) | TKind::Call(_, args) => args.iter().collect(),
            TKind::Neg(a) | TKind::Not(a) | TKind::Cast(a, _) => vec![a],
            TKind::Binary(_, a, b) => vec![a, b],
            TKind::Select(c, a, b) => vec![c, a, b],
        }
    }

    fn any(&self, f: &mut dyn FnMut(&TExpr) -> bool) -> bool {
        f(self) || self.children().into_iter().any(|c| c.any(f))
    }
}

/// A checked input.
pub struct Input {
    pub name: Ident,
    pub dtype: DType,
    pub shape: Vec<Extent>,
}

/// A checked compute stage.
pub struct Stage {
    pub name: Ident,
    pub dtype: DType,
    pub shape: Vec<Extent>,
    /// `(op, [(axis name, extent)])` when the stage is a reduction.
    pub reduce: Option<(ReduceOp, Vec<(Ident, Extent)>)>,
    pub body: TExpr,
}

/// A checked operator.
pub struct Checked {
    pub params: Vec<Ident>,
    pub inputs: Vec<Input>,
    pub stages: Vec<Stage>,
}

struct Env<'a> {
    params: &'a [Ident],
    inputs: &'a [Input],
    stages: &'a [Stage],
    spatial: &'a [Ident],
    reduce: &'a [Ident],
}

impl Env<'_> {
    fn tensor(&self, name: &Ident) -> Option<TensorRef> {
        if let Some(n) = self.stages.iter().position(|s| s.name == *name) {
            return Some(TensorRef::Stage(n));
        }
        self.inputs
            .iter()
            .position(|t| t.name == *name)
            .map(TensorRef::Input)
    }

    fn shape(&self, t: TensorRef) -> &[Extent] {
        match t {
            TensorRef::Input(n) => &self.inputs[n].shape,
            TensorRef::Stage(n) => &self.stages[n].shape,
        }
    }

    fn dtype(&self, t: TensorRef) -> DType {
        match t {
            TensorRef::Input(n) => self.inputs[n].dtype,
            TensorRef::Stage(n) => self.stages[n].dtype,
        }
    }

    fn known_tensors(&self) -> String {
        let names: Vec<String> = self
            .inputs
            .iter()
            .map(|t| t.name.to_string())
            .chain(self.stages.iter().map(|s| s.name.to_string()))
            .collect();
        names.join(", ")
    }
}

fn param_index(params: &mut Vec<Ident>, ident: &Ident) -> usize {
    match params.iter().position(|p| p == ident) {
        Some(n) => n,
        None => {
            params.push(ident.clone());
            params.len() - 1
        }
    }
}

fn extent_of(params: &mut Vec<Ident>, dim: &Dim) -> Extent {
    match dim {
        Dim::Param(ident) => Extent::Param(param_index(params, ident)),
        Dim::Lit(v) => Extent::Lit(*v),
    }
}

/// Checks a parsed definition.
pub fn check(def: &OpDef) -> syn::Result<Checked> {
    let mut params = Vec::new();
    let mut inputs: Vec<Input> = Vec::new();
    let reserved = def
        .inputs
        .iter()
        .map(|t| &t.name)
        .chain(def.stmts.last().map(|s| &s.name));
    for name in reserved {
        if name == "kernel" {
            return Err(syn::Error::new(
                name.span(),
                "`kernel` is the name of the kernel argument of the generated `call`; rename this tensor",
            ));
        }
    }
    for decl in &def.inputs {
        if inputs.iter().any(|t| t.name == decl.name) {
            return Err(syn::Error::new(
                decl.name.span(),
                format!("the input `{}` is declared twice", decl.name),
            ));
        }
        let shape = decl
            .ty
            .dims
            .iter()
            .map(|d| extent_of(&mut params, d))
            .collect();
        inputs.push(Input {
            name: decl.name.clone(),
            dtype: decl.ty.dtype,
            shape,
        });
    }
    let out_shape: Vec<Extent> = def
        .ret
        .dims
        .iter()
        .map(|d| extent_of(&mut params, d))
        .collect();
    if def.stmts.is_empty() {
        return Err(syn::Error::new(
            def.body_span,
            "the body needs at least one statement, e.g. `out[i] = x[i]`",
        ));
    }
    let mut stages: Vec<Stage> = Vec::new();
    let last = def.stmts.len() - 1;
    for (n, stmt) in def.stmts.iter().enumerate() {
        let output = (n == last).then_some((def, out_shape.as_slice()));
        let stage = check_stmt(stmt, output, &mut params, &inputs, &stages)?;
        stages.push(stage);
    }
    Ok(Checked {
        params,
        inputs,
        stages,
    })
}

fn check_names(
    stmt: &Stmt,
    params: &[Ident],
    inputs: &[Input],
    stages: &[Stage],
) -> syn::Result<()> {
    let name = &stmt.name;
    if inputs.iter().any(|t| t.name == *name) || stages.iter().any(|s| s.name == *name) {
        return Err(syn::Error::new(
            name.span(),
            format!("`{name}` is already defined; give each stage a new name"),
        ));
    }
    let mut seen: Vec<&Ident> = Vec::new();
    let axes: Vec<&Ident> = match &stmt.rhs {
        Rhs::Reduce { axes, .. } => axes.iter().map(|a| &a.name).collect(),
        Rhs::Plain(_) => vec![],
    };
    for ident in stmt.indices.iter().chain(axes) {
        if seen.contains(&ident) {
            return Err(syn::Error::new(
                ident.span(),
                format!("the index variable `{ident}` is bound twice in this statement"),
            ));
        }
        if params.contains(ident) {
            return Err(syn::Error::new(
                ident.span(),
                format!("`{ident}` is a shape parameter and cannot be an index variable"),
            ));
        }
        if inputs.iter().any(|t| t.name == *ident) || stages.iter().any(|s| s.name == *ident) {
            return Err(syn::Error::new(
                ident.span(),
                format!("`{ident}` is a tensor and cannot be an index variable"),
            ));
        }
        seen.push(ident);
    }
    Ok(())
}

fn check_stmt(
    stmt: &Stmt,
    output: Option<(&OpDef, &[Extent])>,
    params: &mut Vec<Ident>,
    inputs: &[Input],
    stages: &[Stage],
) -> syn::Result<Stage> {
    check_names(stmt, params, inputs, stages)?;
    let (body, reduce_decl) = match &stmt.rhs {
        Rhs::Reduce {
            op,
            op_span,
            axes,
            body,
        } => (body, Some((*op, *op_span, axes))),
        Rhs::Plain(body) => (body, None),
    };
    let axis_names: Vec<Ident> = reduce_decl
        .map(|(_, _, axes)| axes.iter().map(|a| a.name.clone()).collect())
        .unwrap_or_default();
    let mut texpr = {
        let env = Env {
            params,
            inputs,
            stages,
            spatial: &stmt.indices,
            reduce: &axis_names,
        };
        infer(body, &env)?
    };
    // The stage's dtype: the declared one for the output, else the body's.
    let dtype = match output {
        Some((def, _)) => {
            let declared = def.ret.dtype;
            match texpr.ty {
                Ty::D(d) if d != declared => {
                    return Err(texpr.spans.error(format!(
                        "dtype mismatch: the output is declared {} but this computes {}; \
                         convert with `as {}`",
                        declared.name(),
                        d.name(),
                        declared.name()
                    )));
                }
                _ => declared,
            }
        }
        None => texpr.dtype(),
    };
    settle(&mut texpr, dtype)?;
    if dtype == DType::Bool {
        return Err(texpr.spans.error(
            "a stage cannot hold booleans: use `if cond { 1.0 } else { 0.0 }` to make a number",
        ));
    }
    let env = Env {
        params,
        inputs,
        stages,
        spatial: &stmt.indices,
        reduce: &axis_names,
    };
    // Spatial extents: from the signature for the output, else from use.
    let shape: Vec<Extent> =
        match output {
            Some((def, out_shape)) => {
                if stmt.indices.len() != out_shape.len() {
                    return Err(syn::Error::new(
                    stmt.lhs_bracket,
                    format!(
                        "wrong number of indices: the output `{}` is declared with {} dimension(s) \
                         in the return type, but {} index variable(s) are given here",
                        stmt.name,
                        out_shape.len(),
                        stmt.indices.len()
                    ),
                ))
                .map_err(|mut e| {
                    e.combine(syn::Error::new(def.ret_span, "the return type is declared here"));
                    e
                });
                }
                out_shape.to_vec()
            }
            None => {
                let mut shape = Vec::new();
                for (d, ident) in stmt.indices.iter().enumerate() {
                    shape.push(infer_extent(&texpr, VarRef::Spatial(d), &env).ok_or_else(|| {
                    syn::Error::new(
                        ident.span(),
                        format!(
                            "cannot infer the extent of `{ident}`: use it directly as an index \
                             of an input or an earlier stage (e.g. `x[{ident}]`) in this statement"
                        ),
                    )
                })?);
                }
                shape
            }
        };
    let reduce = match reduce_decl {
        None => None,
        Some((op, op_span, axes)) => {
            if dtype == DType::Bool {
                return Err(syn::Error::new(op_span, "cannot reduce booleans"));
            }
            let mut out = Vec::new();
            for (r, axis) in axes.iter().enumerate() {
                if !texpr.any(&mut |e| matches!(e.kind, TKind::Var(VarRef::Reduce(x)) if x == r)) {
                    return Err(syn::Error::new(
                        axis.name.span(),
                        format!(
                            "the reduction axis `{}` is not used in the reduction's body",
                            axis.name
                        ),
                    ));
                }
                let extent = match &axis.extent {
                    Some(Dim::Param(ident)) => match params.iter().position(|p| p == ident) {
                        Some(n) => Extent::Param(n),
                        None => {
                            return Err(syn::Error::new(
                                ident.span(),
                                format!(
                                    "unknown shape parameter `{ident}`: shape parameters are \
                                     declared in the signature"
                                ),
                            ));
                        }
                    },
                    Some(Dim::Lit(v)) => Extent::Lit(*v),
                    None => infer_extent(&texpr, VarRef::Reduce(r), &env).ok_or_else(|| {
                        syn::Error::new(
                            axis.name.span(),
                            format!(
                                "cannot infer the extent of the reduction axis `{0}`: use it \
                                 directly as an index somewhere (e.g. `x[i, {0}]`) or give its \
                                 range: `{0} in 0..R`",
                                axis.name
                            ),
                        )
                    })?,
                };
                out.push((axis.name.clone(), extent));
            }
            Some((op, out))
        }
    };
    Ok(Stage {
        name: stmt.name.clone(),
        dtype,
        shape,
        reduce,
        body: texpr,
    })
}

/// The extent of `var`: the dimension of the first read that uses it as a
/// bare index.
fn infer_extent(e: &TExpr, var: VarRef, env: &Env) -> Option<Extent> {
    if let TKind::Read(t, idx) = &e.kind {
        for (d, i) in idx.iter().enumerate() {
            if matches!(i.kind, TKind::Var(v) if v == var) {
                return Some(env.shape(*t)[d]);
            }
        }
    }
    e.children()
        .into_iter()
        .find_map(|c| infer_extent(c, var, env))
}

fn mismatch(spans: Spans, what: &str, a: Ty, b: Ty) -> syn::Error {
    spans.error(format!(
        "dtype mismatch in `{what}`: {} vs {}; convert one side with `as <dtype>`",
        a.describe(),
        b.describe()
    ))
}

/// The common type of two operands, or `None` when they do not mix.
fn unify(a: Ty, b: Ty) -> Option<Ty> {
    match (a, b) {
        (Ty::D(x), Ty::D(y)) => (x == y).then_some(a),
        (Ty::D(x), Ty::IntLit) | (Ty::IntLit, Ty::D(x)) => (x != DType::Bool).then_some(Ty::D(x)),
        (Ty::D(x), Ty::FloatLit) | (Ty::FloatLit, Ty::D(x)) => x.is_float().then_some(Ty::D(x)),
        (Ty::IntLit, Ty::IntLit) => Some(Ty::IntLit),
        _ => Some(Ty::FloatLit),
    }
}

/// Gives every open literal in `e` the dtype `target`.
fn settle(e: &mut TExpr, target: DType) -> syn::Result<()> {
    match e.ty {
        Ty::D(_) => {}
        Ty::FloatLit if !target.is_float() => {
            return Err(e.spans.error(format!(
                "dtype mismatch: a float literal where {} is expected",
                target.name()
            )));
        }
        Ty::FloatLit | Ty::IntLit => {
            if target == DType::Bool {
                return Err(e
                    .spans
                    .error("expected a condition (a comparison), found a number"));
            }
            e.ty = Ty::D(target);
            match &mut e.kind {
                TKind::Neg(a) => settle(a, target)?,
                TKind::Binary(_, a, b) | TKind::Select(_, a, b) => {
                    settle(a, target)?;
                    settle(b, target)?;
                }
                TKind::Call(_, args) => {
                    for a in args {
                        settle(a, target)?;
                    }
                }
                _ => {}
            }
        }
    }
    Ok(())
}

fn settle_default(e: &mut TExpr) -> syn::Result<()> {
    let d = e.ty.default_dtype();
    settle(e, d)
}

fn infer(e: &Expr, env: &Env) -> syn::Result<TExpr> {
    let spans = e.spans;
    let (kind, ty) = match &e.kind {
        ExprKind::Float(v, d) => (TKind::Float(*v), d.map_or(Ty::FloatLit, Ty::D)),
        ExprKind::Int(v, d) => (TKind::Int(*v), d.map_or(Ty::IntLit, Ty::D)),
        ExprKind::Name(ident) => resolve_name(ident, env)?,
        ExprKind::Read(ident, idx, bracket) => {
            let Some(t) = env.tensor(ident) else {
                return Err(syn::Error::new(
                    ident.span(),
                    format!(
                        "unknown tensor `{ident}`; the tensors here are: {}",
                        env.known_tensors()
                    ),
                ));
            };
            let rank = env.shape(t).len();
            if idx.len() != rank {
                return Err(syn::Error::new(
                    *bracket,
                    format!(
                        "wrong number of indices: `{ident}` has {rank} dimension(s) but is \
                         indexed with {}",
                        idx.len()
                    ),
                ));
            }
            let mut args = Vec::new();
            for i in idx {
                args.push(infer_index(i, env)?);
            }
            (TKind::Read(t, args), Ty::D(env.dtype(t)))
        }
        ExprKind::Neg(a) => {
            let a = infer(a, env)?;
            if a.ty == Ty::D(DType::Bool) {
                return Err(spans.error("cannot negate a condition; use `!`"));
            }
            let ty = a.ty;
            (TKind::Neg(Box::new(a)), ty)
        }
        ExprKind::Not(a) => {
            let a = infer(a, env)?;
            if a.ty != Ty::D(DType::Bool) {
                return Err(a
                    .spans
                    .error(format!("`!` needs a condition, found {}", a.ty.describe())));
            }
            (TKind::Not(Box::new(a)), Ty::D(DType::Bool))
        }
        ExprKind::Binary(op, a, b) => {
            let mut a = infer(a, env)?;
            let mut b = infer(b, env)?;
            let what = op.symbol();
            match op {
                BinOp::And | BinOp::Or => {
                    for x in [&a, &b] {
                        if x.ty != Ty::D(DType::Bool) {
                            return Err(x.spans.error(format!(
                                "`{what}` needs conditions on both sides, found {}",
                                x.ty.describe()
                            )));
                        }
                    }
                    (
                        TKind::Binary(*op, Box::new(a), Box::new(b)),
                        Ty::D(DType::Bool),
                    )
                }
                _ => {
                    let Some(ty) = unify(a.ty, b.ty) else {
                        return Err(mismatch(spans, what, a.ty, b.ty));
                    };
                    if ty == Ty::D(DType::Bool) {
                        return Err(
                            spans.error(format!("`{what}` cannot be applied to conditions"))
                        );
                    }
                    if let Ty::D(d) = ty {
                        settle(&mut a, d)?;
                        settle(&mut b, d)?;
                    }
                    let comparison = matches!(
                        op,
                        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
                    );
                    if comparison {
                        settle_default(&mut a)?;
                        settle_default(&mut b)?;
                        (
                            TKind::Binary(*op, Box::new(a), Box::new(b)),
                            Ty::D(DType::Bool),
                        )
                    } else {
                        (TKind::Binary(*op, Box::new(a), Box::new(b)), ty)
                    }
                }
            }
        }
        ExprKind::Select(c, a, b) => {
            let c = infer(c, env)?;
            if c.ty != Ty::D(DType::Bool) {
                return Err(c.spans.error(format!(
                    "the condition must be a comparison (e.g. `i < N`), found {}",
                    c.ty.describe()
                )));
            }
            let mut a = infer(a, env)?;
            let mut b = infer(b, env)?;
            let Some(ty) = unify(a.ty, b.ty) else {
                return Err(mismatch(spans, "if … else …", a.ty, b.ty));
            };
            if let Ty::D(d) = ty {
                settle(&mut a, d)?;
                settle(&mut b, d)?;
            }
            (TKind::Select(Box::new(c), Box::new(a), Box::new(b)), ty)
        }
        ExprKind::Call(ident, args) => infer_call(ident, args, spans, env)?,
        ExprKind::Cast(a, d) => {
            let mut a = infer(a, env)?;
            settle_default(&mut a)?;
            (TKind::Cast(Box::new(a), *d), Ty::D(*d))
        }
    };
    Ok(TExpr { kind, ty, spans })
}

fn resolve_name(ident: &Ident, env: &Env) -> syn::Result<(TKind, Ty)> {
    if let Some(d) = env.spatial.iter().position(|v| v == ident) {
        return Ok((TKind::Var(VarRef::Spatial(d)), Ty::D(DType::I64)));
    }
    if let Some(r) = env.reduce.iter().position(|v| v == ident) {
        return Ok((TKind::Var(VarRef::Reduce(r)), Ty::D(DType::I64)));
    }
    if let Some(p) = env.params.iter().position(|v| v == ident) {
        return Ok((TKind::Param(p), Ty::D(DType::I64)));
    }
    if env.tensor(ident).is_some() {
        return Err(syn::Error::new(
            ident.span(),
            format!("the tensor `{ident}` must be indexed, e.g. `{ident}[i]`"),
        ));
    }
    Err(syn::Error::new(
        ident.span(),
        format!(
            "unbound index variable `{ident}`: index variables are bound by the left-hand side \
             (`y[i, j] = …`) or by a reduction (`sum({ident}) …`)"
        ),
    ))
}

fn infer_index(e: &Expr, env: &Env) -> syn::Result<TExpr> {
    let mut t = infer(e, env)?;
    match t.ty {
        Ty::D(DType::I64) | Ty::IntLit => {
            settle(&mut t, DType::I64)?;
            Ok(t)
        }
        Ty::FloatLit | Ty::D(DType::F32) | Ty::D(DType::F64) => Err(t.spans.error(format!(
            "dtype mismatch: an index must be an integer (i64), but this is {}",
            t.ty.describe()
        ))),
        Ty::D(d) => Err(t.spans.error(format!(
            "dtype mismatch: an index must be i64, but this is {}; convert with `as i64`",
            d.name()
        ))),
    }
}

fn infer_call(ident: &Ident, args: &[Expr], spans: Spans, env: &Env) -> syn::Result<(TKind, Ty)> {
    let name = ident.to_string();
    let Some(f) = Intrinsic::from_name(&name) else {
        return Err(syn::Error::new(
            ident.span(),
            format!(
                "unknown function `{name}`; the functions are exp, log, sqrt, tanh, sigmoid, erf, \
                 abs, pow, max, min and select (and sum/max/min(k) reductions)"
            ),
        ));
    };
    if args.len() != f.arity() {
        return Err(spans.error(format!(
            "`{name}` takes {} argument(s), got {}",
            f.arity(),
            args.len()
        )));
    }
    let mut targs = Vec::new();
    for a in args {
        targs.push(infer(a, env)?);
    }
    let mut ty = targs[0].ty;
    if let Some(b) = targs.get(1) {
        ty = unify(ty, b.ty).ok_or_else(|| mismatch(spans, &name, ty, b.ty))?;
    }
    let float_only = !matches!(f, Intrinsic::Abs | Intrinsic::Max | Intrinsic::Min);
    match ty {
        Ty::D(DType::Bool) => {
            return Err(spans.error(format!("`{name}` cannot be applied to conditions")));
        }
        Ty::D(d) if float_only && !d.is_float() => {
            return Err(spans.error(format!(
                "dtype mismatch: `{name}` needs a float argument, found {}; convert with `as f32`",
                d.name()
            )));
        }
        Ty::IntLit if float_only => ty = Ty::FloatLit,
        _ => {}
    }
    if let Ty::D(d) = ty {
        for a in &mut targs {
            settle(a, d)?;
        }
    }
    Ok((TKind::Call(f, targs), ty))
}

#[cfg(test)]
mod tests;
