//! Reduction loops folded into the micro-kernel call they wrap: a serial
//! loop whose body is one call that walks A's columns and B's rows exactly
//! one block further per iteration (`A` offset `+ kc·a_cs`, `B` offset
//! `+ kc·b_rs`, C, m and n fixed) is the same product as one call with
//! `kc·extent` columns. A convolution whose panel holds its reduction axes
//! contiguously (`rc rr rs`: the im2col panel of a small-channel stem) then
//! runs one call over the whole window instead of one per kernel row, so the
//! accumulators are loaded and stored once instead of `C·R` times.
//!
//! The merged call starts from zero where the loop's first iteration did
//! (`accumulate` with the variable at 0); the iterations after the first
//! accumulated, so the rule requires `accumulate` to be nonzero there: a
//! nonzero constant, or a sum of enclosing loop variables with nonnegative
//! coefficients in which the loop's own variable appears.

use crate::arith::{Affine, Decompose, mentions};
use crate::te::{Expr, ExprKind, Var, VarId};

use super::ir::{ForKind, MicroKernelCall, Stmt};
use super::passes::map_children;

/// Every serial loop of `s` that only steps a micro-kernel call through its
/// reduction, merged into the call; inner loops first, so a nest of
/// reduction loops (`rc { rr { call } }`) becomes one call.
pub fn coalesce_kernel_reductions(s: Stmt) -> Stmt {
    coalesce(s, &mut Vec::new())
}

fn coalesce(s: Stmt, loops: &mut Vec<VarId>) -> Stmt {
    match s {
        Stmt::For {
            var,
            extent,
            kind,
            body,
        } => {
            loops.push(var.id());
            let body = coalesce(*body, loops);
            loops.pop();
            let serial = matches!(kind, ForKind::Serial | ForKind::Unrolled);
            let body = match single_call(body) {
                Ok(call) => match serial.then(|| merged(&call, &var, extent, loops)).flatten() {
                    Some(merged) => return Stmt::MicroKernelCall(Box::new(merged)),
                    None => Stmt::MicroKernelCall(call),
                },
                Err(body) => body,
            };
            Stmt::For {
                var,
                extent,
                kind,
                body: Box::new(body),
            }
        }
        other => map_children(other, &mut |child| coalesce(child, loops)),
    }
}

/// The call when `body` is one call (alone or as a one-item sequence), else
/// the body back.
fn single_call(body: Stmt) -> Result<Box<MicroKernelCall>, Stmt> {
    match body {
        Stmt::MicroKernelCall(call) => Ok(call),
        Stmt::Seq(mut items) if items.len() == 1 => match items.pop() {
            Some(Stmt::MicroKernelCall(call)) => Ok(call),
            Some(other) => Err(Stmt::Seq(vec![other])),
            None => Err(Stmt::nop()),
        },
        other => Err(other),
    }
}

/// The call covering every iteration of the loop over `var` (`extent`
/// iterations) around `call`, when the loop only steps its reduction;
/// `loops` are the variables of the loops around that loop.
fn merged(
    call: &MicroKernelCall,
    loop_var: &Var,
    extent: i64,
    loops: &[VarId],
) -> Option<MicroKernelCall> {
    let var = loop_var.id();
    let exact = Decompose::EXACT;
    if call.counts[2].as_int() != Some(call.kc) || call.epilogue.is_some() {
        return None;
    }
    let a = Affine::with(&call.a.offset, exact);
    let b = Affine::with(&call.b.offset, exact);
    let steps_one_block = a.coefficient(var)? == call.kc.checked_mul(call.a.col_stride)?
        && b.coefficient(var)? == call.kc.checked_mul(call.b.row_stride)?;
    let fixed = [&call.c.offset, &call.counts[0], &call.counts[1]]
        .iter()
        .all(|e| !mentions(e, var));
    if !steps_one_block || !fixed || !accumulates_after_first(&call.accumulate, var, loops) {
        return None;
    }
    let kc = call.kc.checked_mul(extent)?;
    let at_zero = |form: &Affine| form.substitute(&loop_var.expr(), &Affine::default());
    let mut out = call.clone();
    out.kc = kc;
    out.counts[2] = Expr::i64(kc);
    out.a.offset = at_zero(&a).to_expr();
    out.b.offset = at_zero(&b).to_expr();
    out.accumulate = at_zero(&Affine::with(&call.accumulate, exact)).to_expr();
    Some(out)
}

/// Whether `accumulate` is nonzero whenever `var ≥ 1`: a nonzero constant,
/// or a nonnegative combination of loop variables (each ≥ 0) in which `var`
/// has a positive coefficient.
fn accumulates_after_first(accumulate: &Expr, var: VarId, loops: &[VarId]) -> bool {
    if let Some(v) = accumulate.as_int() {
        return v != 0;
    }
    let form = Affine::with(accumulate, Decompose::EXACT);
    let is_loop_var = |id: VarId| id == var || loops.contains(&id);
    let nonnegative = form.constant >= 0
        && form.terms.iter().all(|(atom, c)| {
            *c >= 0 && matches!(atom.kind(), ExprKind::Var(v) if is_loop_var(v.id()))
        });
    nonnegative && form.coefficient(var).is_some_and(|c| c > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::IterKind;
    use crate::tir::MicroKernelOperand;

    /// `for k in 0..4 { C (+)= A[.., k·8 ..] · B[k·8 .., ..] }` with `kc = 8`:
    /// A and B step one block per iteration when `a_step` and `b_step` are
    /// 8 and 8·16.
    fn nest(a_step: i64, b_step: i64, accumulate: impl Fn(&Var) -> Expr) -> (Var, Stmt) {
        let k = Var::new("k.0", 4, IterKind::Reduce);
        let operand = |buffer, offset: Expr, row_stride| MicroKernelOperand {
            buffer,
            offset,
            row_stride,
            col_stride: 1,
        };
        let call = MicroKernelCall {
            kernel: "generic_4x4".into(),
            m: 4,
            n: 4,
            kc: 8,
            counts: [Expr::i64(4), Expr::i64(4), Expr::i64(8)],
            a: operand(0, k.expr() * a_step + 5i64, 32),
            b: operand(1, k.expr() * b_step, 16),
            c: operand(2, Expr::i64(0), 16),
            accumulate: accumulate(&k),
            epilogue: None,
        };
        let body = Stmt::For {
            var: k.clone(),
            extent: 4,
            kind: ForKind::Serial,
            body: Box::new(Stmt::MicroKernelCall(Box::new(call))),
        };
        (k, body)
    }

    fn only_call(s: &Stmt) -> Option<&MicroKernelCall> {
        match s {
            Stmt::MicroKernelCall(call) => Some(call),
            _ => None,
        }
    }

    #[test]
    fn a_loop_stepping_one_block_becomes_one_call_from_zero() {
        let (_, s) = nest(8, 128, |k| k.expr());
        let merged = coalesce_kernel_reductions(s);
        let call = only_call(&merged).expect("one call");
        assert_eq!(call.kc, 32);
        assert_eq!(call.counts[2].as_int(), Some(32));
        assert_eq!(call.a.offset.as_int(), Some(5));
        assert_eq!(call.b.offset.as_int(), Some(0));
        assert_eq!(call.accumulate.as_int(), Some(0));
    }

    #[test]
    fn an_outer_reduction_loop_stays_in_the_accumulation() {
        let outer = Var::new("rc", 3, IterKind::Reduce);
        let (_, s) = nest(8, 128, |k| k.expr() + outer.expr());
        let merged = coalesce_kernel_reductions(Stmt::For {
            var: outer.clone(),
            extent: 3,
            kind: ForKind::Serial,
            body: Box::new(s),
        });
        // The outer loop reads A and B at the same place every time: it
        // stays, and its variable is what the merged call accumulates by.
        let Stmt::For { body, .. } = &merged else {
            panic!("the outer loop stays: {merged:?}")
        };
        let call = only_call(body).expect("one call inside");
        assert_eq!(call.kc, 32);
        assert_eq!(call.accumulate, outer.expr());
    }

    #[test]
    fn loops_that_do_not_step_one_block_or_might_overwrite_are_kept() {
        type Accumulate = fn(&Var) -> Expr;
        let cases: [(&str, i64, i64, Accumulate); 5] = [
            ("A steps past the block", 9, 128, |k| k.expr()),
            ("B steps less than the block", 8, 64, |k| k.expr()),
            ("always from zero", 8, 128, |_| Expr::i64(0)),
            ("zero again at k = 2", 8, 128, |k| k.expr() - 2i64),
            ("accumulate of another variable", 8, 128, |_| {
                Var::new("x", 2, IterKind::Spatial).expr()
            }),
        ];
        for (label, a_step, b_step, accumulate) in cases {
            let (_, s) = nest(a_step, b_step, accumulate);
            let kept = coalesce_kernel_reductions(s);
            assert!(
                matches!(&kept, Stmt::For { extent: 4, .. }),
                "{label}: {kept:?}"
            );
        }
    }

    #[test]
    fn a_parallel_loop_is_never_merged() {
        let (_, s) = nest(8, 128, |k| k.expr());
        let Stmt::For {
            var, extent, body, ..
        } = s
        else {
            unreachable!()
        };
        let parallel = Stmt::For {
            var,
            extent,
            kind: ForKind::Parallel,
            body,
        };
        let kept = coalesce_kernel_reductions(parallel);
        assert!(matches!(
            kept,
            Stmt::For {
                kind: ForKind::Parallel,
                ..
            }
        ));
    }
}
