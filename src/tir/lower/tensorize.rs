//! Lowering a tensorized block: the stage's three innermost loops and their
//! multiply-accumulate become one [`MicroKernelCall`]. The access pattern is checked
//! here, where the buffers are known: the output and B must be contiguous
//! along the n loop, A must not depend on n nor B on m, every index must be
//! affine in the block's loops, and the block must fit the micro-kernel.

use std::collections::HashMap;

use crate::arith::Affine;
use crate::runtime::micro_kernels;
use crate::schedule::{IterId, TENSORIZE_BLOCK, Tensorized};
use crate::te::{BinOp, CmpOp, DType, Expr, ExprKind, IterKind, Var, VarId, max, min};

use super::super::ir::{BufferId, MicroKernelCall, MicroKernelOperand, Stmt};
use super::{LowerError, Lowering};

/// `residual + Σ coefs[v]·block_var[v]`, the residual free of block
/// variables (`N` of them: a tensorized or a packed block).
pub(super) struct BlockForm<const N: usize = TENSORIZE_BLOCK> {
    pub(super) coefs: [i64; N],
    pub(super) residual: Expr,
}

/// `e` split into the block variables `vars` and the rest, or `None` when a
/// block variable appears other than linearly. The residual is `e` at the
/// block's origin (every block variable 0).
pub(super) fn block_form<const N: usize>(e: &Expr, vars: &[Var]) -> Option<BlockForm<N>> {
    let form = Affine::of(e);
    let mut coefs = [0; N];
    for (coef, var) in coefs.iter_mut().zip(vars) {
        *coef = form.coefficient(var.id())?;
    }
    let origin: HashMap<VarId, Expr> = vars.iter().map(|v| (v.id(), Expr::i64(0))).collect();
    Some(BlockForm {
        coefs,
        residual: e.substitute(&origin),
    })
}

/// The row-major flat index of `indices` in a buffer of `shape`.
pub(super) fn flat(indices: &[Expr], shape: &[i64]) -> Expr {
    let mut flat = Expr::i64(0);
    for (index, extent) in indices.iter().zip(shape) {
        flat = flat * Expr::i64(*extent) + index.clone();
    }
    flat
}

/// `(v, limit)` when `p` is `lhs < bound` with `lhs` affine in block loop
/// `v` alone, with coefficient 1: the loop runs `limit = bound - rest` times.
fn upper_bound<const N: usize>(p: &Expr, vars: &[Var]) -> Option<(usize, Expr)> {
    let ExprKind::Cmp(CmpOp::Lt, lhs, bound) = p.kind() else {
        return None;
    };
    let form = block_form::<N>(lhs, vars)?;
    let used: Vec<usize> = (0..vars.len()).filter(|&v| form.coefs[v] != 0).collect();
    match used.as_slice() {
        [v] if form.coefs[*v] == 1 && block_form::<N>(bound, vars)?.coefs == [0; N] => {
            Some((*v, bound.clone() - form.residual))
        }
        _ => None,
    }
}

/// The predicates of a block's statement split into those outside the
/// block (returned second, for a guard around the call) and those on its
/// loops, which must each be an upper bound `v + rest < bound` on one block
/// loop: the count along each loop is its extent, or `bound - rest` where
/// smaller (the edge of a split that does not divide). The guard that is
/// no such bound is returned as the error.
pub(super) fn block_counts<const N: usize>(
    vars: &[Var],
    predicates: Vec<Expr>,
) -> Result<(Vec<Expr>, Vec<Expr>), Expr> {
    let (inside, outside): (Vec<Expr>, Vec<Expr>) =
        predicates.into_iter().partition(|p| reads_any(p, vars));
    let mut counts: Vec<Expr> = vars.iter().map(|v| Expr::i64(v.extent())).collect();
    for p in inside {
        let (v, limit) = upper_bound::<N>(&p, vars).ok_or(p)?;
        counts[v] = min(counts[v].clone(), max(limit, Expr::i64(0)));
    }
    Ok((counts, outside))
}

/// Whether `e` reads any of the loop variables `vars`.
fn reads_any(e: &Expr, vars: &[Var]) -> bool {
    e.any(&mut |x| matches!(x.kind(), ExprKind::Var(v) if vars.iter().any(|b| b.id() == v.id())))
}

/// A call's `accumulate`: the sum of the reduction loops between the init
/// and the block, unless a guard outside the block reads them (then none:
/// the call always adds).
pub(super) fn accumulate_from(outside: &[Expr], reductions: &[Var]) -> Option<Expr> {
    (!outside.iter().any(|p| reads_any(p, reductions))).then(|| {
        reductions
            .iter()
            .map(|v| v.expr())
            .reduce(|a, b| a + b)
            .unwrap_or_else(|| Expr::i64(0))
    })
}

/// `call` under the conjunction of the guards outside its block.
pub(super) fn guarded_by(outside: Vec<Expr>, call: Stmt) -> Stmt {
    match outside.into_iter().reduce(|a, b| a & b) {
        Some(cond) => Stmt::IfThenElse {
            cond,
            then: Box::new(call),
            otherwise: None,
        },
        None => call,
    }
}

/// Which block loop plays which part.
struct Roles {
    m: usize,
    n: usize,
    k: usize,
}

impl Lowering<'_> {
    pub(super) fn tensorize_error(&self, index: usize, reason: String) -> LowerError {
        LowerError::Tensorize {
            stage: self.state.stages()[index].name.clone(),
            reason,
        }
    }

    /// Where the tensorized block of stage `index` starts among its loops,
    /// checked again (later steps may have changed them).
    pub(super) fn tensorized_block(
        &self,
        index: usize,
        t: &Tensorized,
    ) -> Result<usize, LowerError> {
        self.state
            .tensorize_block(index, t.iter, &t.kernel)
            .map_err(|reason| self.tensorize_error(index, reason))
    }

    /// The micro-kernel call replacing the block `block` of stage `index`,
    /// whose update is `buffer[store_index] += value` under `predicates`,
    /// and whether it starts its tile from zero (no init needed).
    ///
    /// `reductions`: the reduction loops between the stage's init and the
    /// block. Unless a guard outside the block reads them, the call adds to
    /// C only where one of them is nonzero: every tile meets them in
    /// lexicographic order from all zero (spatial loops between only pick
    /// the tile), so its first call writes `C = A·B` and the init is not
    /// needed (TVM's `reduce_init`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gemm_call(
        &self,
        index: usize,
        block: &[IterId],
        buffer: BufferId,
        store_index: &[Expr],
        value: &Expr,
        predicates: Vec<Expr>,
        reductions: &[Var],
    ) -> Result<(Stmt, bool), LowerError> {
        let err = |reason: String| self.tensorize_error(index, reason);
        let name = self.intrinsic_name(index);
        let kernel = micro_kernels::find(&name).ok_or_else(|| {
            err(format!(
                "no micro-kernel '{name}' (known: {})",
                micro_kernels::all_kernels()
                    .iter()
                    .map(|k| k.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let vars = self.block_vars(index, block);
        // A guard `v + rest < bound` on one block loop shortens the call to
        // `bound - rest` along it (the kernel's edge tiles).
        let (counts, outside) = self.block_counts(index, &vars, predicates)?;
        let (c, [(xb, xf), (yb, yf)]) =
            self.product_operands(index, &vars, buffer, store_index, value)?;
        let roles = self.roles(index, block, &c)?;
        // B varies along n with stride 1 and not along m; A not along n.
        let is_b = |f: &BlockForm| f.coefs[roles.n] == 1 && f.coefs[roles.m] == 0;
        let is_a = |f: &BlockForm| f.coefs[roles.n] == 0;
        let ((ab, af), (bb, bf)) = if is_b(&yf) && is_a(&xf) {
            ((xb, xf), (yb, yf))
        } else if is_b(&xf) && is_a(&yf) {
            ((yb, yf), (xb, xf))
        } else {
            let name = |b: BufferId| self.buffers[b].name.clone();
            return Err(err(format!(
                "one operand must be contiguous along the n loop '{}' and not depend on m, the other must not depend on n; '{}' has strides {:?} and '{}' {:?} over {}: pack the n-strided operand with cache_read",
                vars[roles.n].name(),
                name(xb),
                xf.coefs,
                name(yb),
                yf.coefs,
                vars.iter().map(|v| v.name()).collect::<Vec<_>>().join(", ")
            )));
        };
        let extent = |r: usize| vars[r].extent();
        let (m, n, kc) = (extent(roles.m), extent(roles.n), extent(roles.k));
        if m > kernel.mr as i64 || n > kernel.nr as i64 {
            return Err(err(format!(
                "the block is {m}×{n} but {} computes at most {}×{}",
                kernel.name, kernel.mr, kernel.nr
            )));
        }
        let strides = [
            af.coefs[roles.m],
            af.coefs[roles.k],
            bf.coefs[roles.k],
            c.coefs[roles.m],
        ];
        if strides.iter().any(|&s| s < 0) {
            return Err(err(format!(
                "negative strides {strides:?} are not supported"
            )));
        }
        let operand =
            |buffer: BufferId, f: BlockForm, row: usize, col: Option<usize>| MicroKernelOperand {
                buffer,
                offset: f.residual.clone(),
                row_stride: f.coefs[row],
                col_stride: col.map_or(1, |c| f.coefs[c]),
            };
        let accumulate = accumulate_from(&outside, reductions);
        let from_zero = accumulate.is_some();
        let call = MicroKernelCall {
            kernel: kernel.name.to_string(),
            m,
            n,
            kc,
            counts: [
                counts[roles.m].clone(),
                counts[roles.n].clone(),
                counts[roles.k].clone(),
            ],
            a: operand(ab, af, roles.m, Some(roles.k)),
            b: operand(bb, bf, roles.k, None),
            c: operand(buffer, c, roles.m, None),
            accumulate: accumulate.unwrap_or_else(|| Expr::i64(1)),
            epilogue: None,
        };
        Ok((
            guarded_by(outside, Stmt::MicroKernelCall(Box::new(call))),
            from_zero,
        ))
    }

    /// The intrinsic stage `index` is tensorized with (empty when none).
    pub(super) fn intrinsic_name(&self, index: usize) -> String {
        self.state.stages()[index]
            .tensorize
            .as_ref()
            .map(|t| t.kernel.clone())
            .unwrap_or_default()
    }

    /// The loop variables of the block `block` of stage `index`.
    pub(super) fn block_vars(&self, index: usize, block: &[IterId]) -> Vec<Var> {
        block
            .iter()
            .map(|l| self.layouts[index].leaf_vars[l].clone())
            .collect()
    }

    /// The counts along the block's loops and the guards outside the block
    /// (see [`block_counts`]), or the error naming the guard that is neither.
    pub(super) fn block_counts(
        &self,
        index: usize,
        vars: &[Var],
        predicates: Vec<Expr>,
    ) -> Result<(Vec<Expr>, Vec<Expr>), LowerError> {
        block_counts::<TENSORIZE_BLOCK>(vars, predicates).map_err(|p| {
            self.tensorize_error(
                index,
                format!(
                    "a loop of the block has a guard ({p}) that is not an upper bound on one of its loops"
                ),
            )
        })
    }

    /// The block forms of the store `buffer[store_index]` and of the two
    /// f32 reads whose product `value` is, over the block's loops `vars`.
    pub(super) fn product_operands(
        &self,
        index: usize,
        vars: &[Var],
        buffer: BufferId,
        store_index: &[Expr],
        value: &Expr,
    ) -> Result<(BlockForm, [(BufferId, BlockForm); 2]), LowerError> {
        let err = |reason: String| self.tensorize_error(index, reason);
        let ExprKind::Binary(BinOp::Mul, x, y) = value.kind() else {
            return Err(err(format!(
                "the reduction body must be a product of two tensor reads, not {value}"
            )));
        };
        let read = |e: &Expr| -> Result<(BufferId, Vec<Expr>), LowerError> {
            match e.kind() {
                ExprKind::Read(t, idx) if e.dtype() == DType::F32 => {
                    let id = self
                        .buffers
                        .iter()
                        .position(|b| b.handle.id() == t.id())
                        .ok_or_else(|| err(format!("'{}' is not a buffer", t.name())))?;
                    Ok((id, idx.clone()))
                }
                _ => Err(err(format!(
                    "the reduction body must be a product of two f32 tensor reads; '{e}' is not one (inline nothing into it)"
                ))),
            }
        };
        let form = |id: BufferId, idx: &[Expr]| -> Result<BlockForm, LowerError> {
            block_form(&flat(idx, &self.buffers[id].shape), vars).ok_or_else(|| {
                err(format!(
                    "'{}' is indexed non-linearly in the block's loops",
                    self.buffers[id].name
                ))
            })
        };
        let (xb, xi) = read(x)?;
        let (yb, yi) = read(y)?;
        Ok((
            form(buffer, store_index)?,
            [(xb, form(xb, &xi)?), (yb, form(yb, &yi)?)],
        ))
    }

    /// The m, n and k loops of the block from the output's access: n is the
    /// spatial loop the output is contiguous along.
    fn roles(&self, index: usize, block: &[IterId], c: &BlockForm) -> Result<Roles, LowerError> {
        let stage = &self.state.stages()[index];
        let position: HashMap<IterKind, Vec<usize>> =
            (0..block.len()).fold(HashMap::new(), |mut map, r| {
                map.entry(stage.iters[block[r]].kind).or_default().push(r);
                map
            });
        let spatial = position
            .get(&IterKind::Spatial)
            .cloned()
            .unwrap_or_default();
        let k = position
            .get(&IterKind::Reduce)
            .and_then(|r| r.first().copied())
            .unwrap_or(0);
        // Prefer the inner loop when both would do (an extent-1 loop).
        let n = spatial
            .iter()
            .rev()
            .copied()
            .find(|&s| c.coefs[s] == 1)
            .ok_or_else(|| {
                self.tensorize_error(
                    index,
                    format!(
                        "the output '{}' is not contiguous along either spatial loop of the block (strides {:?}); cache_write it",
                        stage.name, c.coefs
                    ),
                )
            })?;
        let m = spatial.iter().copied().find(|&s| s != n).unwrap_or(n);
        if c.coefs[k] != 0 {
            return Err(
                self.tensorize_error(index, "the output depends on the reduction loop".into())
            );
        }
        Ok(Roles { m, n, k })
    }
}
