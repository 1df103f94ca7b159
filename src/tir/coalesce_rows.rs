//! Row loops folded into the stencil call they wrap: a serial loop whose
//! body is one single-row stencil call that moves the output and the input
//! by a fixed step per iteration, with the weights, the counts and
//! `accumulate` fixed, is the same work as one call of `extent` rows (the
//! primitive walks them in order). A depthwise convolution computed in
//! place then makes one call per channel instead of one per output row,
//! and the call's setup is paid once per plane. A fused epilogue's addends
//! step by their own fixed amount per row (a bias per channel: none).

use crate::arith::{Affine, Decompose, mentions};
use crate::te::{Var, VarId};

use super::ir::{ForKind, StencilCall, Stmt};
use super::passes::map_children;

/// Every serial loop of `s` that only steps a single-row stencil call from
/// row to row, merged into the call.
pub fn coalesce_stencil_rows(s: Stmt) -> Stmt {
    match s {
        Stmt::For {
            var,
            extent,
            kind,
            body,
        } => {
            let body = coalesce_stencil_rows(*body);
            let serial = matches!(kind, ForKind::Serial | ForKind::Unrolled);
            if serial
                && let Stmt::StencilCall(call) = &body
                && let Some(merged) = merged(call, &var, extent)
            {
                return Stmt::StencilCall(Box::new(merged));
            }
            Stmt::For {
                var,
                extent,
                kind,
                body: Box::new(body),
            }
        }
        other => map_children(other, &mut coalesce_stencil_rows),
    }
}

/// The call covering every iteration of the loop over `var` (`extent`
/// iterations) around the single-row `call`, when the loop only moves its
/// output and input forward by a fixed step.
fn merged(call: &StencilCall, loop_var: &Var, extent: i64) -> Option<StencilCall> {
    if call.rows != 1 {
        return None;
    }
    let var: VarId = loop_var.id();
    let exact = Decompose::EXACT;
    let out = Affine::with(&call.out.offset, exact);
    let input = Affine::with(&call.input.offset, exact);
    let (out_y, in_y) = (out.coefficient(var)?, input.coefficient(var)?);
    let fixed = call
        .counts
        .iter()
        .chain([&call.weight.offset, &call.accumulate])
        .all(|e| !mentions(e, var));
    if !fixed || out_y < 0 || in_y < 0 {
        return None;
    }
    let at_zero = |form: &Affine| form.substitute(&loop_var.expr(), &Affine::default());
    let mut merged = call.clone();
    merged.rows = extent;
    merged.out.offset = at_zero(&out).to_expr();
    merged.out.strides[3] = out_y;
    merged.input.offset = at_zero(&input).to_expr();
    merged.input.strides[3] = in_y;
    // An epilogue's addends move from row to row by their own step.
    for addend in merged
        .epilogue
        .iter_mut()
        .flat_map(|e| e.addends.iter_mut())
    {
        let form = Affine::with(&addend.offset, exact);
        addend.row_stride = form.coefficient(var).filter(|step| *step >= 0)?;
        addend.offset = at_zero(&form).to_expr();
    }
    Some(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::micro_kernels::Isa;
    use crate::te::{Expr, IterKind};
    use crate::tir::StencilOperand;

    /// `for y in 0..6 { out[y·out_step + j] (+)= Σ w[c·9 + w_step·y ..] ·
    /// in[y·20 + j + ..] }`, one row per call.
    fn nest(out_step: i64, w_step: i64, kind: ForKind) -> (Var, Stmt) {
        let y = Var::new("i2", 6, IterKind::Spatial);
        let c = Var::new("c", 4, IterKind::Spatial);
        let operand = |buffer, offset: Expr, strides| StencilOperand {
            buffer,
            offset,
            strides,
        };
        let weight_offset = match w_step {
            0 => c.expr() * 9,
            step => c.expr() * 9 + y.expr() * step,
        };
        let call = StencilCall {
            isa: Isa::Avx512,
            extents: [18, 3, 3],
            counts: [Expr::i64(18), Expr::i64(3), Expr::i64(3)],
            rows: 1,
            out: operand(0, c.expr() * 108 + y.expr() * out_step, [1, 0, 0, 0]),
            input: operand(1, y.expr() * 20, [1, 20, 1, 0]),
            weight: operand(2, weight_offset, [0, 3, 1, 0]),
            accumulate: Expr::i64(0),
            epilogue: None,
        };
        let nest = Stmt::For {
            var: y.clone(),
            extent: 6,
            kind,
            body: Box::new(Stmt::StencilCall(Box::new(call))),
        };
        (y, nest)
    }

    fn only_call(s: &Stmt) -> Option<&StencilCall> {
        match s {
            Stmt::StencilCall(call) => Some(call),
            _ => None,
        }
    }

    #[test]
    fn a_row_loop_becomes_the_rows_of_one_call() {
        for kind in [ForKind::Serial, ForKind::Unrolled] {
            let (_, nest) = nest(18, 0, kind);
            let merged = coalesce_stencil_rows(nest);
            let call = only_call(&merged).unwrap_or_else(|| panic!("one call: {merged:?}"));
            assert_eq!(call.rows, 6);
            assert_eq!(call.out.strides, [1, 0, 0, 18]);
            assert_eq!(call.input.strides, [1, 20, 1, 20]);
            assert_eq!(call.input.offset.as_int(), Some(0));
            assert!(
                !call.out.offset.to_string().contains("i2"),
                "{}",
                call.out.offset
            );
        }
    }

    #[test]
    fn loops_that_move_the_weights_run_in_parallel_or_already_merged_stay() {
        let (_, moving_weights) = nest(18, 9, ForKind::Serial);
        assert!(only_call(&coalesce_stencil_rows(moving_weights)).is_none());
        let (_, parallel) = nest(18, 0, ForKind::Parallel);
        assert!(only_call(&coalesce_stencil_rows(parallel)).is_none());
        // A second loop around a merged call stays a loop (rows of rows
        // would need a second row stride).
        let (_, inner) = nest(18, 0, ForKind::Serial);
        let outer = Stmt::For {
            var: Var::new("c", 4, IterKind::Spatial),
            extent: 4,
            kind: ForKind::Serial,
            body: Box::new(inner),
        };
        match coalesce_stencil_rows(outer) {
            Stmt::For { body, .. } => {
                assert_eq!(only_call(&body).map(|c| c.rows), Some(6));
            }
            other => panic!("the outer loop stays: {other:?}"),
        }
    }
}
