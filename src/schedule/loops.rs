//! Loop transforms of one stage: split, fuse, reorder, annotate, pragma.

use crate::te::IterKind;

use super::error::StepErrorKind;
use super::state::{ComputeAt, IterId, IterNode, Relation, Stage, State, unique_name};
use super::step::Annotation;

/// The largest product of split factors accepted.
pub const MAX_SPLIT_PRODUCT: i64 = 1 << 31;

/// The largest `auto_unroll_max_step` accepted.
pub const MAX_AUTO_UNROLL: u32 = 1 << 16;

fn push_iter(stage: &mut Stage, name: String, kind: IterKind, extent: i64) -> IterId {
    let name = unique_name(&name, |n| stage.iters.iter().any(|it| it.name == n));
    stage.iters.push(IterNode {
        name,
        kind,
        extent,
        annotation: Annotation::None,
    });
    stage.iters.len() - 1
}

impl State {
    /// Re-points stages computed at `from` (a loop of `stage`) to `to`.
    fn move_attachments(&mut self, stage: usize, from: &[IterId], to: IterId) {
        for s in &mut self.stages {
            if let ComputeAt::At { stage: host, iter } = &mut s.compute_at
                && *host == stage
                && from.contains(iter)
            {
                *iter = to;
            }
        }
    }

    pub(crate) fn split(
        &mut self,
        stage: usize,
        iter: IterId,
        factors: &[i64],
    ) -> Result<(), StepErrorKind> {
        if factors.is_empty() {
            return Err(StepErrorKind::NoFactors);
        }
        if let Some(&factor) = factors.iter().find(|&&f| f < 1) {
            return Err(StepErrorKind::InvalidFactor { factor });
        }
        let inner = factors
            .iter()
            .try_fold(1i64, |acc, &f| {
                acc.checked_mul(f).filter(|&p| p <= MAX_SPLIT_PRODUCT)
            })
            .ok_or(StepErrorKind::FactorsTooLarge {
                limit: MAX_SPLIT_PRODUCT,
            })?;
        let s = &mut self.stages[stage];
        let parent = s.iters[iter].clone();
        let mut children = vec![push_iter(
            s,
            format!("{}.0", parent.name),
            parent.kind,
            (parent.extent + inner - 1) / inner,
        )];
        for (n, &f) in factors.iter().enumerate() {
            children.push(push_iter(
                s,
                format!("{}.{}", parent.name, n + 1),
                parent.kind,
                f,
            ));
        }
        let position = s.leaves.iter().position(|&l| l == iter).unwrap_or(0);
        s.leaves
            .splice(position..=position, children.iter().copied());
        s.relations.push(Relation::Split {
            parent: iter,
            children: children.clone(),
            factors: factors.to_vec(),
        });
        let innermost = children[children.len() - 1];
        self.move_attachments(stage, &[iter], innermost);
        Ok(())
    }

    pub(crate) fn fuse(&mut self, stage: usize, iters: &[IterId]) -> Result<(), StepErrorKind> {
        if iters.len() < 2 {
            return Err(StepErrorKind::FuseTooFew);
        }
        let s = &mut self.stages[stage];
        let start = s.leaves.iter().position(|&l| l == iters[0]).unwrap_or(0);
        if s.leaves.get(start..start + iters.len()) != Some(iters) {
            return Err(StepErrorKind::NotConsecutive {
                order: s.leaf_names(),
            });
        }
        let kinds: Vec<IterKind> = iters.iter().map(|&i| s.iters[i].kind).collect();
        if let (Some(sp), Some(rd)) = (
            iters
                .iter()
                .find(|&&i| s.iters[i].kind == IterKind::Spatial),
            iters.iter().find(|&&i| s.iters[i].kind == IterKind::Reduce),
        ) {
            return Err(StepErrorKind::FuseMixedKinds {
                spatial: s.iters[*sp].name.clone(),
                reduce: s.iters[*rd].name.clone(),
            });
        }
        let name = iters
            .iter()
            .map(|&i| s.iters[i].name.as_str())
            .collect::<Vec<_>>()
            .join("@");
        let extent = iters.iter().map(|&i| s.iters[i].extent).product();
        let fused = push_iter(s, name, kinds[0], extent);
        s.leaves.splice(start..start + iters.len(), [fused]);
        s.relations.push(Relation::Fuse {
            parents: iters.to_vec(),
            fused,
        });
        self.move_attachments(stage, iters, fused);
        Ok(())
    }

    pub(crate) fn reorder(&mut self, stage: usize, order: &[IterId]) -> Result<(), StepErrorKind> {
        let s = &mut self.stages[stage];
        let mut sorted_new = order.to_vec();
        let mut sorted_old = s.leaves.clone();
        sorted_new.sort_unstable();
        sorted_old.sort_unstable();
        if sorted_new != sorted_old {
            return Err(StepErrorKind::NotAPermutation {
                stage: s.name.clone(),
                expected: s.leaf_names(),
            });
        }
        s.leaves = order.to_vec();
        Ok(())
    }

    pub(crate) fn annotate(
        &mut self,
        stage: usize,
        iter: IterId,
        annotation: Annotation,
    ) -> Result<(), StepErrorKind> {
        let it = &mut self.stages[stage].iters[iter];
        // A vectorized reduction loop (innermost, as every vectorized loop)
        // runs with lane-wise partial results; a parallel one would race.
        if (it.kind, annotation) == (IterKind::Reduce, Annotation::Parallel) {
            return Err(StepErrorKind::AnnotateReduction {
                iter: it.name.clone(),
                annotation: "parallelized",
            });
        }
        it.annotation = annotation;
        Ok(())
    }

    pub(crate) fn pragma(&mut self, stage: usize, max_step: u32) -> Result<(), StepErrorKind> {
        if max_step > MAX_AUTO_UNROLL {
            return Err(StepErrorKind::UnrollTooLarge {
                value: max_step,
                limit: MAX_AUTO_UNROLL,
            });
        }
        self.stages[stage].auto_unroll_max_step = max_step;
        Ok(())
    }
}
