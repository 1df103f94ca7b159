//! Stages that add buffers: cache_write and cache_read.

use crate::te::{ComputeOp, Expr, ExprKind, IterKind, Tensor, Var};

use super::error::StepErrorKind;
use super::state::{ComputeAt, Scope, Stage, State, unique_name};

/// A copy rule `out[axes] = source[axes permuted by layout]` (source
/// dimension `d` indexed by axis `layout[d]`) with fresh axes named like
/// `like`'s.
pub(crate) fn copy_rule(source: &Tensor, like: &[Var], layout: &[usize]) -> ComputeOp {
    let axes: Vec<Var> = like
        .iter()
        .map(|v| Var::new(v.name(), v.extent(), IterKind::Spatial))
        .collect();
    let body = source.at(layout.iter().map(|&d| axes[d].expr()));
    ComputeOp { axes, body }
}

/// Spatial axes `i0, i1, …` for a tensor of `shape`.
fn axes_for(shape: &[i64]) -> Vec<Var> {
    shape
        .iter()
        .enumerate()
        .map(|(d, &e)| Var::new(format!("i{d}"), e, IterKind::Spatial))
        .collect()
}

impl State {
    pub(crate) fn unique_stage_name(&self, base: &str) -> String {
        unique_name(base, |n| self.stages.iter().any(|s| s.name == n))
    }

    /// Inserts `stage` at `position`, keeping placements pointing at the same stages.
    pub(crate) fn insert_stage(&mut self, position: usize, stage: Stage) {
        for s in &mut self.stages {
            if let ComputeAt::At { stage: host, .. } = &mut s.compute_at
                && *host >= position
            {
                *host += 1;
            }
        }
        self.stages.insert(position, stage);
    }

    /// `layout`, or the identity, after checking it permutes `rank` dimensions.
    fn permutation(
        &self,
        stage: usize,
        layout: Option<&[usize]>,
        rank: usize,
    ) -> Result<Vec<usize>, StepErrorKind> {
        let identity: Vec<usize> = (0..rank).collect();
        let Some(layout) = layout else {
            return Ok(identity);
        };
        let mut sorted = layout.to_vec();
        sorted.sort_unstable();
        if sorted != identity {
            return Err(StepErrorKind::BadLayout {
                stage: self.stages[stage].name.clone(),
                layout: layout.to_vec(),
                rank,
            });
        }
        Ok(layout.to_vec())
    }

    pub(crate) fn cache_write(
        &mut self,
        stage: usize,
        layout: Option<&[usize]>,
    ) -> Result<(), StepErrorKind> {
        let layout = self.permutation(stage, layout, self.stages[stage].tensor.ndim())?;
        let s = &self.stages[stage];
        let Some(rule) = s.compute.clone() else {
            return Err(StepErrorKind::InputStage {
                stage: s.name.clone(),
                what: "there is nothing to cache_write",
            });
        };
        let untouched = s.relations.is_empty()
            && s.leaves.iter().copied().eq(0..s.iters.len())
            && s.compute_at == ComputeAt::Root
            && self.attached_to(stage).is_empty();
        if !untouched {
            return Err(StepErrorKind::CacheWriteAfterTransform {
                stage: s.name.clone(),
            });
        }
        let local_name = self.unique_stage_name(&format!("{}.local", s.name));
        // The local rule: the same body over the axes in the layout's order.
        let local_rule = ComputeOp {
            axes: layout.iter().map(|&d| rule.axes[d].clone()).collect(),
            body: rule.body.clone(),
        };
        let local_shape: Vec<i64> = layout.iter().map(|&d| s.tensor.shape()[d]).collect();
        let local_tensor = Tensor::from_compute(&local_name, &local_shape, local_rule.clone());
        let copy = copy_rule(&local_tensor, &rule.axes, &layout);
        let local = Stage::fresh(
            local_name,
            local_tensor,
            Some(local_rule),
            Scope::Local,
            false,
        );
        let s = &mut self.stages[stage];
        *s = Stage {
            auto_unroll_max_step: s.auto_unroll_max_step,
            tensorize: None,
            row_math: None,
            pack: None,
            ..Stage::fresh(
                s.name.clone(),
                s.tensor.clone(),
                Some(copy),
                s.scope,
                s.is_output,
            )
        };
        self.insert_stage(stage, local);
        Ok(())
    }

    pub(crate) fn cache_read(
        &mut self,
        stage: usize,
        readers: &[usize],
        layout: Option<&[usize]>,
    ) -> Result<(), StepErrorKind> {
        if readers.is_empty() {
            return Err(StepErrorKind::NoReaders);
        }
        let source = self.stages[stage].tensor.clone();
        let rank = source.shape().len();
        let layout = &self.permutation(stage, layout, rank)?;
        for &r in readers {
            if r == stage || !self.stages[r].reads(&source) {
                return Err(StepErrorKind::NotAReader {
                    reader: self.stages[r].name.clone(),
                    stage: self.stages[stage].name.clone(),
                });
            }
        }
        let name = self.unique_stage_name(&format!("{}.local", self.stages[stage].name));
        // copy[i_0, …] = source[j] with j[layout[d]] = i_d.
        let shape: Vec<i64> = layout.iter().map(|&d| source.shape()[d]).collect();
        let axes = axes_for(&shape);
        let mut source_index = vec![Expr::i64(0); rank];
        for (axis, &d) in axes.iter().zip(layout) {
            source_index[d] = axis.expr();
        }
        let rule = ComputeOp {
            body: source.at(source_index),
            axes,
        };
        let copy_tensor = Tensor::from_compute(&name, &shape, rule.clone());
        for &r in readers {
            if let Some(c) = &mut self.stages[r].compute {
                c.body = c.body.rewrite(&mut |e| match e.kind() {
                    ExprKind::Read(t, idx) if *t == source => Some(Expr::new(
                        e.dtype(),
                        ExprKind::Read(
                            copy_tensor.clone(),
                            layout.iter().map(|&d| idx[d].clone()).collect(),
                        ),
                    )),
                    _ => None,
                });
            }
        }
        let copy = Stage::fresh(name, copy_tensor, Some(rule), Scope::Local, false);
        self.insert_stage(stage + 1, copy);
        Ok(())
    }
}
