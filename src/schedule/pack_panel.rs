//! pack_panel: a stage holding what one reader reads of another, indexed
//! by the reader's axes, so that a strided or windowed read becomes a
//! contiguous panel (the gather of an im2col, one tile at a time).

use std::collections::HashMap;

use crate::arith::mentions;
use crate::te::bounds::find_out_of_bounds;
use crate::te::{ComputeOp, Expr, ExprKind, IterKind, Tensor, Var, VarId};

use super::error::StepErrorKind;
use super::state::{Scope, Stage, State};

impl State {
    pub(crate) fn pack_panel(
        &mut self,
        stage: usize,
        reader: usize,
        axes: &[String],
    ) -> Result<(), StepErrorKind> {
        let source = self.stages[stage].tensor.clone();
        let fail = |reason: String| StepErrorKind::PackPanel {
            stage: self.stages[stage].name.clone(),
            reader: self.stages[reader].name.clone(),
            reason,
        };
        let Some(rule) = self.stages[reader].compute.clone() else {
            return Err(fail("the reader is an input".into()));
        };
        let mut indices: Vec<Vec<Expr>> = Vec::new();
        rule.body.any(&mut |e| {
            if let ExprKind::Read(t, idx) = e.kind()
                && *t == source
                && !indices.contains(idx)
            {
                indices.push(idx.clone());
            }
            false
        });
        let index = match indices.as_slice() {
            [] => return Err(fail("it does not read that stage".into())),
            [index] => index.clone(),
            more => {
                return Err(fail(format!(
                    "it reads that stage at {} different indices; a panel serves one",
                    more.len()
                )));
            }
        };
        let reader_axes: Vec<Var> = rule
            .axes
            .iter()
            .chain(rule.reduction().map(|r| r.axes.as_slice()).unwrap_or(&[]))
            .cloned()
            .collect();
        let names = || {
            reader_axes
                .iter()
                .map(|a| a.name().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut chosen: Vec<Var> = Vec::new();
        for name in axes {
            let Some(axis) = reader_axes.iter().find(|a| a.name() == name) else {
                return Err(fail(format!(
                    "the reader has no axis '{name}'; its axes are {}",
                    names()
                )));
            };
            if chosen.iter().any(|c| c.id() == axis.id()) {
                return Err(fail(format!("axis '{name}' is given twice")));
            }
            if !index.iter().any(|i| mentions(i, axis.id())) {
                return Err(fail(format!(
                    "the read's index does not use axis '{name}'; give only the axes it uses"
                )));
            }
            chosen.push(axis.clone());
        }
        if let Some(missing) = reader_axes.iter().find(|a| {
            !chosen.iter().any(|c| c.id() == a.id()) && index.iter().any(|i| mentions(i, a.id()))
        }) {
            return Err(fail(format!(
                "the read's index uses axis '{}', which the panel's axes must include",
                missing.name()
            )));
        }
        let panel_axes: Vec<Var> = chosen
            .iter()
            .map(|a| Var::new(a.name(), a.extent(), IterKind::Spatial))
            .collect();
        let to_panel: HashMap<VarId, Expr> = chosen
            .iter()
            .zip(&panel_axes)
            .map(|(a, p)| (a.id(), p.expr()))
            .collect();
        let panel_rule = ComputeOp {
            body: source.at(index.iter().map(|i| i.substitute(&to_panel))),
            axes: panel_axes,
        };
        if let Some(out) = find_out_of_bounds(&panel_rule.body, &[]) {
            return Err(fail(format!(
                "the read's dimension {} may leave the stage (range {}) for some point of the \
                 reader's domain; a read guarded by a condition cannot be packed",
                out.dim, out.range
            )));
        }
        let name = self.unique_stage_name(&format!("{}.panel", self.stages[stage].name));
        let shape: Vec<i64> = chosen.iter().map(Var::extent).collect();
        let panel = Tensor::from_compute(&name, &shape, panel_rule.clone());
        let panel_read: Vec<Expr> = chosen.iter().map(Var::expr).collect();
        if let Some(c) = &mut self.stages[reader].compute {
            c.body = c.body.rewrite(&mut |e| match e.kind() {
                ExprKind::Read(t, _) if *t == source => Some(Expr::new(
                    e.dtype(),
                    ExprKind::Read(panel.clone(), panel_read.clone()),
                )),
                _ => None,
            });
        }
        let stage_of_panel = Stage::fresh(name, panel, Some(panel_rule), Scope::Local, false);
        self.insert_stage(stage + 1, stage_of_panel);
        Ok(())
    }
}
