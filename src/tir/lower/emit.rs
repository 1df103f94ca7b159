//! Loop nests: the function body of root stages, and per stage the loops in
//! the scheduled order, the guarded store, reduction init and update, and the
//! stages computed at each loop.

use std::collections::HashMap;

use crate::schedule::{Annotation, ComputeAt, IterId, Relation, is_stencil_intrinsic};
use crate::te::bounds::range_of;
use crate::te::{Expr, ExprKind, IterKind, ReduceOp, Var, VarId, max, min};

use super::super::ir::{ForKind, Stmt};
use super::{LowerError, Lowering};

fn for_kind(annotation: Annotation) -> ForKind {
    match annotation {
        Annotation::None => ForKind::Serial,
        Annotation::Parallel => ForKind::Parallel,
        Annotation::Vectorize => ForKind::Vectorized,
        Annotation::Unroll => ForKind::Unrolled,
    }
}

fn conjunction(conds: Vec<Expr>) -> Option<Expr> {
    conds.into_iter().reduce(|a, b| a & b)
}

fn guarded(cond: Option<Expr>, body: Stmt) -> Stmt {
    match cond {
        Some(cond) => Stmt::IfThenElse {
            cond,
            then: Box::new(body),
            otherwise: None,
        },
        None => body,
    }
}

impl Lowering<'_> {
    /// The function body: the nest of every stage computed at the root, in
    /// stage order, inside the allocations of the intermediate ones.
    pub(crate) fn emit_body(&mut self) -> Result<(), LowerError> {
        let mut body = Vec::new();
        let mut allocations = Vec::new();
        for (index, stage) in self.state.stages().iter().enumerate() {
            if stage.compute.is_none() || stage.compute_at != ComputeAt::Root {
                continue;
            }
            if !stage.is_output
                && let Some(b) = self.layouts[index].buffer
            {
                allocations.push(b);
            }
            body.push(self.emit_stage(index)?);
        }
        let mut root = Stmt::Seq(body);
        for b in allocations.into_iter().rev() {
            root = Stmt::Allocate {
                buffer: b,
                body: Box::new(root),
            };
        }
        self.body = root;
        Ok(())
    }

    /// Reads of stages rewritten to reads of their buffers, shifted by the
    /// region offsets where a buffer holds only a region.
    fn localize(&self, e: &Expr) -> Expr {
        e.rewrite(&mut |x| {
            let ExprKind::Read(t, idx) = x.kind() else {
                return None;
            };
            let stage = *self.stage_of.get(&t.id())?;
            let layout = &self.layouts[stage];
            let buffer = &self.buffers[layout.buffer?];
            let idx: Vec<Expr> = idx
                .iter()
                .enumerate()
                .map(|(d, i)| {
                    let i = self.localize(i);
                    match layout.offsets.get(d) {
                        Some(o) if layout.region && o.as_int() != Some(0) => i - o,
                        _ => i,
                    }
                })
                .collect();
            Some(buffer.handle.at(idx))
        })
    }

    /// Conditions keeping a stage inside its domain and its tensor:
    /// (spatial, reduction). Every loop split by factors that do not divide
    /// it gets `value < extent`; a region's global index stays in the tensor.
    fn predicates(&self, index: usize) -> (Vec<Expr>, Vec<Expr>) {
        let stage = &self.state.stages()[index];
        let layout = &self.layouts[index];
        let (mut sp, mut rd) = (Vec::new(), Vec::new());
        for relation in &stage.relations {
            let Relation::Split { parent, .. } = relation else {
                continue;
            };
            let Some(value) = layout.values.get(parent) else {
                continue;
            };
            let extent = layout.extents[*parent];
            if range_of(value, &[]).hi >= extent {
                let target = match stage.iters[*parent].kind {
                    IterKind::Spatial => &mut sp,
                    IterKind::Reduce => &mut rd,
                };
                target.push(value.lt(extent));
            }
        }
        if layout.region {
            for r in 0..stage.spatial_roots() {
                let global = layout.global(r);
                let range = range_of(&global, &[]);
                let full = stage.tensor.shape()[r];
                if range.lo < 0 {
                    sp.push(global.ge(0));
                }
                if range.hi >= full {
                    sp.push(global.lt(full));
                }
            }
        }
        (sp, rd)
    }

    /// Statements to run at the top of loop `leaf` of stage `index`: the nests
    /// of the stages computed there, each inside its allocation.
    ///
    /// They run in stage order, which puts every producer before each stage
    /// that reads it: stages are in topological order, and a stage `D`
    /// computed there comes after everything computed inside it (the last of
    /// those has all its consumers inside `D` or is read by `D`), so after
    /// any producer that a stage inside `D` reads.
    fn wrap_attached(
        &mut self,
        index: usize,
        leaf: IterId,
        body: Stmt,
    ) -> Result<Stmt, LowerError> {
        let attached: Vec<usize> = self
            .state
            .attached_to(index)
            .into_iter()
            .filter(|&a| matches!(self.state.stages()[a].compute_at, ComputeAt::At { iter, .. } if iter == leaf))
            .collect();
        if attached.is_empty() {
            return Ok(body);
        }
        let mut items: Vec<Stmt> = attached
            .iter()
            .map(|&a| self.emit_stage(a))
            .collect::<Result<_, _>>()?;
        items.push(body);
        let mut stmt = Stmt::Seq(items);
        for &a in attached.iter().rev() {
            if let Some(buffer) = self.layouts[a].buffer {
                stmt = Stmt::Allocate {
                    buffer,
                    body: Box::new(stmt),
                };
            }
        }
        Ok(stmt)
    }

    fn wrap_loops(
        &mut self,
        index: usize,
        leaves: &[IterId],
        mut body: Stmt,
    ) -> Result<Stmt, LowerError> {
        for &leaf in leaves.iter().rev() {
            body = self.wrap_attached(index, leaf, body)?;
            let stage = &self.state.stages()[index];
            let var = self.layouts[index].leaf_vars[&leaf].clone();
            body = Stmt::For {
                extent: var.extent(),
                var,
                kind: for_kind(stage.iters[leaf].annotation),
                body: Box::new(body),
            };
        }
        Ok(body)
    }

    /// The loop nest computing stage `index` over its domain.
    pub(crate) fn emit_stage(&mut self, index: usize) -> Result<Stmt, LowerError> {
        let stage = &self.state.stages()[index];
        let Some(rule) = stage.compute.clone() else {
            return Ok(Stmt::nop());
        };
        let layout = &self.layouts[index];
        let buffer = layout.buffer.unwrap_or(0);
        let mut map: HashMap<VarId, Expr> = HashMap::new();
        for (d, v) in rule.axes.iter().enumerate() {
            map.insert(v.id(), layout.global(d));
        }
        let reduction = rule.reduction().cloned();
        if let Some(r) = &reduction {
            for (n, v) in r.axes.iter().enumerate() {
                map.insert(v.id(), layout.roots[rule.axes.len() + n].clone());
            }
        }
        let store_index: Vec<Expr> = (0..rule.axes.len())
            .map(|d| {
                if layout.region {
                    layout.roots[d].clone()
                } else {
                    layout.global(d)
                }
            })
            .collect();
        let source = reduction.as_ref().map_or(&rule.body, |r| &r.source);
        let value = self.localize(&self.expand_inline(source).substitute(&map));
        let (spatial_pred, reduce_pred) = self.predicates(index);
        let leaves = stage.leaves.clone();
        let mut own_vars: Vec<VarId> = layout.leaf_vars.values().map(Var::id).collect();
        let max_step = stage.auto_unroll_max_step;

        let nest = match reduction {
            None => match stage.pack {
                Some(p) => {
                    let start = self.packed_loops(index, &p)?;
                    let call =
                        self.pack_call(index, &p, buffer, &store_index, &value, spatial_pred)?;
                    self.wrap_loops(index, &leaves[..start], call)?
                }
                None => {
                    let store = Stmt::Store {
                        buffer,
                        indices: store_index,
                        value,
                    };
                    let body = guarded(conjunction(spatial_pred), store);
                    self.wrap_loops(index, &leaves, body)?
                }
            },
            Some(r) => {
                let mut first_reduce = leaves
                    .iter()
                    .position(|&l| stage.iters[l].kind == IterKind::Reduce)
                    .unwrap_or(leaves.len());
                let block = match &stage.tensorize {
                    Some(t) => Some(self.tensorized_block(index, t)?),
                    None => None,
                };
                // A tensorized block is one call: its reduction starts
                // (and the init runs) outside it.
                if let Some(start) = block {
                    first_reduce = first_reduce.min(start);
                }
                let handle = self.buffers[buffer].handle.clone();
                let current = handle.at(store_index.clone());
                let combined = match r.op {
                    ReduceOp::Sum => current + value.clone(),
                    ReduceOp::Max => max(current, value.clone()),
                    ReduceOp::Min => min(current, value.clone()),
                };
                let mut all_pred = spatial_pred.clone();
                all_pred.extend(reduce_pred);
                let (update, from_zero) = match block {
                    Some(start) => {
                        // The reduction loops between the init and the
                        // block: a tile's first call is where all are 0.
                        let between = &leaves[first_reduce..start];
                        let reductions: Vec<Var> = between
                            .iter()
                            .filter(|l| stage.iters[**l].kind == IterKind::Reduce)
                            .map(|l| self.layouts[index].leaf_vars[l].clone())
                            .collect();
                        let stencil = stage
                            .tensorize
                            .as_ref()
                            .is_some_and(|t| is_stencil_intrinsic(&t.kernel));
                        let lower_call = if stencil {
                            Self::stencil_call
                        } else {
                            Self::gemm_call
                        };
                        let (call, from_zero) = lower_call(
                            self,
                            index,
                            &leaves[start..],
                            buffer,
                            &store_index,
                            &value,
                            all_pred,
                            &reductions,
                        )?;
                        (self.wrap_loops(index, between, call)?, from_zero)
                    }
                    None => {
                        let update = guarded(
                            conjunction(all_pred),
                            Stmt::Store {
                                buffer,
                                indices: store_index.clone(),
                                value: combined,
                            },
                        );
                        (
                            self.wrap_loops(index, &leaves[first_reduce..], update)?,
                            false,
                        )
                    }
                };
                let body = if from_zero {
                    update
                } else {
                    let (init, init_vars) = self.emit_init(
                        index,
                        &leaves[first_reduce..],
                        store_index,
                        spatial_pred,
                        r.op.identity_expr(stage.tensor.dtype()),
                    );
                    own_vars.extend(init_vars);
                    Stmt::Seq(vec![init, update])
                };
                self.wrap_loops(index, &leaves[..first_reduce], body)?
            }
        };
        if max_step > 0 {
            self.auto_unroll
                .extend(own_vars.into_iter().map(|v| (v, max_step)));
        }
        Ok(nest)
    }

    /// Stores `identity` at every spatial point of the loops `leaves` (fresh
    /// copies of the spatial ones; the reduction loops are skipped). Returns
    /// the nest and the ids of its loop variables.
    fn emit_init(
        &mut self,
        index: usize,
        leaves: &[IterId],
        store_index: Vec<Expr>,
        pred: Vec<Expr>,
        identity: Expr,
    ) -> (Stmt, Vec<VarId>) {
        let stage = &self.state.stages()[index];
        let mut copies: Vec<(IterId, Var)> = Vec::new();
        for &leaf in leaves {
            let it = &stage.iters[leaf];
            if it.kind == IterKind::Spatial {
                let original = self.layouts[index].leaf_vars[&leaf].clone();
                let name = self.fresh_name(&stage.name, &format!("{}.init", it.name));
                copies.push((leaf, Var::new(name, original.extent(), IterKind::Spatial)));
            }
        }
        let map: HashMap<VarId, Expr> = copies
            .iter()
            .map(|(leaf, v)| (self.layouts[index].leaf_vars[leaf].id(), v.expr()))
            .collect();
        let buffer = self.layouts[index].buffer.unwrap_or(0);
        let store = Stmt::Store {
            buffer,
            indices: store_index.iter().map(|i| i.substitute(&map)).collect(),
            value: identity,
        };
        let cond = conjunction(pred.iter().map(|p| p.substitute(&map)).collect());
        let mut body = guarded(cond, store);
        let ids = copies.iter().map(|(_, v)| v.id()).collect();
        for (leaf, var) in copies.into_iter().rev() {
            body = Stmt::For {
                extent: var.extent(),
                var,
                kind: for_kind(stage.iters[leaf].annotation),
                body: Box::new(body),
            };
        }
        (body, ids)
    }
}
