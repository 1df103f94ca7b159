//! rfactor: turns one reduction loop into a spatial axis of a new stage.

use std::collections::HashMap;

use crate::te::{ComputeOp, Expr, ExprKind, IterKind, Reduce, Tensor, Var, VarId, select};

use super::error::StepErrorKind;
use super::relations::{derive_extents, derive_values};
use super::state::{IterId, Relation, Scope, Stage, State};
use crate::te::bounds::range_of;

impl State {
    pub(crate) fn rfactor(&mut self, stage: usize, iter: IterId) -> Result<(), StepErrorKind> {
        let s = &self.stages[stage];
        let (Some(rule), true) = (s.compute.clone(), s.is_reduction()) else {
            return Err(StepErrorKind::NotAReduction {
                stage: s.name.clone(),
            });
        };
        let Some(reduction) = rule.reduction().cloned() else {
            return Err(StepErrorKind::NotAReduction {
                stage: s.name.clone(),
            });
        };
        let not_factorable = || StepErrorKind::NotAReductionLoop {
            iter: s.iters[iter].name.clone(),
        };
        let root = s
            .split_root(iter)
            .filter(|&r| r >= s.spatial_roots())
            .ok_or_else(not_factorable)?;
        // Every current loop that depends on `root` must come from it by splits alone.
        let family: Vec<IterId> = s
            .leaves
            .iter()
            .copied()
            .filter(|&l| descends_from(s, l, root))
            .collect();
        if family.iter().any(|&l| s.split_root(l) != Some(root)) {
            return Err(not_factorable());
        }
        if let Some(&attached) = self.attached_to(stage).first() {
            return Err(StepErrorKind::HasAttachedStages {
                stage: s.name.clone(),
                attached: self.stages[attached].name.clone(),
            });
        }

        let extents = derive_extents(
            s,
            &s.iters[..s.root_count()]
                .iter()
                .map(|i| i.extent)
                .collect::<Vec<_>>(),
        );
        let factor_var = Var::new(&s.iters[iter].name, extents[iter], IterKind::Spatial);
        let spatial: Vec<Var> = rule
            .axes
            .iter()
            .map(|v| Var::new(v.name(), v.extent(), IterKind::Spatial))
            .collect();
        let mut leaf_values = HashMap::new();
        let mut remaining_reduce = Vec::new();
        for &l in &family {
            if l == iter {
                leaf_values.insert(l, factor_var.expr());
            } else {
                let v = Var::new(&s.iters[l].name, extents[l], IterKind::Reduce);
                leaf_values.insert(l, v.expr());
                remaining_reduce.push(v);
            }
        }
        let values = derive_values(s, &leaf_values, &extents);
        let root_value = values
            .get(&root)
            .cloned()
            .unwrap_or_else(|| factor_var.expr());
        let root_var = &reduction.axes[root - s.spatial_roots()];
        let mut substitution: HashMap<VarId, Expr> = rule
            .axes
            .iter()
            .zip(&spatial)
            .map(|(old, new)| (old.id(), new.expr()))
            .collect();
        substitution.insert(root_var.id(), root_value);
        let mut source = reduction.source.substitute(&substitution);
        // Each split of the axis by factors that do not divide it is guarded.
        let guard = s
            .relations
            .iter()
            .filter_map(|rel| match rel {
                Relation::Split { parent, .. } if descends_from(s, *parent, root) => {
                    let value = values.get(parent)?;
                    (range_of(value, &[]).hi >= extents[*parent])
                        .then(|| value.lt(extents[*parent]))
                }
                _ => None,
            })
            .reduce(|a, b| a & b);
        if let Some(guard) = guard {
            source = select(
                guard,
                source.clone(),
                reduction.op.identity_expr(source.dtype()),
            );
        }
        let mut rf_reduce = Vec::new();
        for axis in &reduction.axes {
            if axis == root_var {
                rf_reduce.extend(remaining_reduce.iter().cloned());
            } else {
                rf_reduce.push(axis.clone());
            }
        }
        let rf_body = if rf_reduce.is_empty() {
            source
        } else {
            Expr::new(
                source.dtype(),
                ExprKind::Reduce(Reduce {
                    op: reduction.op,
                    source,
                    axes: rf_reduce,
                }),
            )
        };
        let mut rf_axes = vec![factor_var.clone()];
        rf_axes.extend(spatial);
        let mut rf_shape = vec![factor_var.extent()];
        rf_shape.extend_from_slice(s.tensor.shape());
        let rf_name = self.unique_stage_name(&format!("{}.rf", s.name));
        let rf_rule = ComputeOp {
            axes: rf_axes,
            body: rf_body,
        };
        let rf_tensor = Tensor::from_compute(&rf_name, &rf_shape, rf_rule.clone());

        let axes: Vec<Var> = rule
            .axes
            .iter()
            .map(|v| Var::new(v.name(), v.extent(), IterKind::Spatial))
            .collect();
        let over = Var::new(factor_var.name(), factor_var.extent(), IterKind::Reduce);
        let mut index = vec![over.expr()];
        index.extend(axes.iter().map(Var::expr));
        let read = rf_tensor.at(index);
        let body = Expr::new(
            read.dtype(),
            ExprKind::Reduce(Reduce {
                op: reduction.op,
                source: read,
                axes: vec![over],
            }),
        );
        let s = &mut self.stages[stage];
        *s = Stage {
            compute_at: s.compute_at,
            auto_unroll_max_step: s.auto_unroll_max_step,
            tensorize: None,
            row_math: None,
            pack: None,
            ..Stage::fresh(
                s.name.clone(),
                s.tensor.clone(),
                Some(ComputeOp { axes, body }),
                s.scope,
                s.is_output,
            )
        };
        let rf = Stage::fresh(rf_name, rf_tensor, Some(rf_rule), Scope::Global, false);
        self.insert_stage(stage, rf);
        Ok(())
    }
}

/// Whether loop `id` of `stage` is derived (through any relations) from `root`.
fn descends_from(stage: &Stage, id: IterId, root: IterId) -> bool {
    if id == root {
        return true;
    }
    stage.relations.iter().any(|r| match r {
        Relation::Split {
            parent, children, ..
        } => children.contains(&id) && descends_from(stage, *parent, root),
        Relation::Fuse { parents, fused } => {
            *fused == id && parents.iter().any(|p| descends_from(stage, *p, root))
        }
    })
}
