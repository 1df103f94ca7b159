//! Text form of expressions, shared by `Display` (the names users gave) and
//! the canonical form (normalised names, typed constants).

use std::fmt::{self, Write};

use super::dtype::DType;
use super::expr::{Const, Expr, ExprKind, Var};
use super::tensor::Tensor;

/// How variables and tensors are named, and whether constants carry a type.
pub(crate) trait Naming {
    fn var(&self, v: &Var) -> String;
    fn tensor(&self, t: &Tensor) -> String;
    fn typed_constants(&self) -> bool;
}

/// The names given at creation; constants typed only where not the default.
struct GivenNames;

impl Naming for GivenNames {
    fn var(&self, v: &Var) -> String {
        v.name().to_string()
    }
    fn tensor(&self, t: &Tensor) -> String {
        t.name().to_string()
    }
    fn typed_constants(&self) -> bool {
        false
    }
}

fn write_const(out: &mut String, c: Const, dtype: DType, typed: bool) -> fmt::Result {
    match c {
        Const::Float(v) => write!(out, "{v:?}")?,
        Const::Int(v) => write!(out, "{v}")?,
        Const::Bool(v) => write!(out, "{v}")?,
    }
    let default = matches!(dtype, DType::F32 | DType::I64 | DType::Bool);
    if typed || !default {
        out.push_str(dtype.name());
    }
    Ok(())
}

fn write_list(out: &mut String, items: &[Expr], naming: &dyn Naming) -> fmt::Result {
    for (n, e) in items.iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        write_expr(out, e, naming)?;
    }
    Ok(())
}

/// Appends the text form of `e` to `out`.
pub(crate) fn write_expr(out: &mut String, e: &Expr, naming: &dyn Naming) -> fmt::Result {
    match e.kind() {
        ExprKind::Const(c) => write_const(out, *c, e.dtype(), naming.typed_constants()),
        ExprKind::Var(v) => write!(out, "{}", naming.var(v)),
        ExprKind::Neg(a) => {
            out.push_str("(-");
            write_expr(out, a, naming)?;
            out.push(')');
            Ok(())
        }
        ExprKind::Not(a) => {
            out.push('!');
            write_expr(out, a, naming)
        }
        ExprKind::Binary(op, a, b) if op.is_function() => {
            write!(out, "{}(", op.symbol())?;
            write_list(out, &[a.clone(), b.clone()], naming)?;
            out.push(')');
            Ok(())
        }
        ExprKind::Binary(op, a, b) => write_infix(out, op.symbol(), a, b, naming),
        ExprKind::Cmp(op, a, b) => write_infix(out, op.symbol(), a, b, naming),
        ExprKind::Select {
            cond,
            then,
            otherwise,
        } => {
            out.push_str("select(");
            write_list(
                out,
                &[cond.clone(), then.clone(), otherwise.clone()],
                naming,
            )?;
            out.push(')');
            Ok(())
        }
        ExprKind::Cast(a) => {
            write!(out, "{}(", e.dtype())?;
            write_expr(out, a, naming)?;
            out.push(')');
            Ok(())
        }
        ExprKind::Call(f, args) => {
            write!(out, "{}(", f.name())?;
            write_list(out, args, naming)?;
            out.push(')');
            Ok(())
        }
        ExprKind::Read(t, idx) => {
            write!(out, "{}[", naming.tensor(t))?;
            write_list(out, idx, naming)?;
            out.push(']');
            Ok(())
        }
        ExprKind::Reduce(r) => {
            write!(out, "{}(", r.op.name())?;
            write_expr(out, &r.source, naming)?;
            out.push_str(", axis=[");
            for (n, v) in r.axes.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write!(out, "{}: {}", naming.var(v), v.extent())?;
            }
            out.push_str("])");
            Ok(())
        }
    }
}

fn write_infix(
    out: &mut String,
    symbol: &str,
    a: &Expr,
    b: &Expr,
    naming: &dyn Naming,
) -> fmt::Result {
    out.push('(');
    write_expr(out, a, naming)?;
    write!(out, " {symbol} ")?;
    write_expr(out, b, naming)?;
    out.push(')');
    Ok(())
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::new();
        write_expr(&mut s, self, &GivenNames)?;
        f.write_str(&s)
    }
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The DAG with the names users gave, one tensor a line.
impl fmt::Display for super::dag::ComputeDag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use super::tensor::TensorOp;
        for t in self.tensors() {
            let dims: Vec<String> = t.shape().iter().map(i64::to_string).collect();
            let shape = format!("{}[{}]", t.dtype(), dims.join(", "));
            match t.op() {
                TensorOp::Placeholder => writeln!(f, "{} = placeholder {shape}", t.name())?,
                TensorOp::Compute(op) => {
                    let axes: Vec<String> = op
                        .axes
                        .iter()
                        .map(|v| format!("{}: {}", v.name(), v.extent()))
                        .collect();
                    let mut body = String::new();
                    write_expr(&mut body, &op.body, &GivenNames)?;
                    writeln!(
                        f,
                        "{} = compute {shape} ({}) {body}",
                        t.name(),
                        axes.join(", ")
                    )?;
                }
            }
        }
        let outputs: Vec<&str> = self.outputs().iter().map(|t| t.name()).collect();
        writeln!(f, "outputs {}", outputs.join(", "))
    }
}
