//! Lowering a scheduled [`State`] to a [`PrimFunc`]: buffers, the domain of
//! every stage (bound inference for stages computed at a loop), loop nests,
//! inlining, guards for non-divisible splits, reduction init/update, then the
//! simplification passes.

mod bound;
mod emit;
mod layout;
mod tensorize;

use std::collections::{HashMap, HashSet};

use thiserror::Error;

use crate::schedule::{ComputeAt, Scope, State};
use crate::te::{Expr, ExprKind};

use super::ir::{Buffer, BufferId, MemScope, PrimFunc, Stmt};
use super::passes;
use layout::StageLayout;

/// A state that could not be lowered. Valid states always lower; this
/// reports an inconsistency instead of panicking.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LowerError {
    /// A DAG input or output has no stage.
    #[error("tensor '{0}' of the DAG has no stage in the state")]
    MissingStage(String),
    /// A tensorized block that the micro-kernel cannot compute.
    #[error("cannot tensorize stage '{stage}': {reason}")]
    Tensorize {
        /// The stage.
        stage: String,
        /// What does not match, and how to fix it.
        reason: String,
    },
}

/// Shared state of one lowering.
pub(crate) struct Lowering<'a> {
    pub state: &'a State,
    /// Stage position by the id of its tensor.
    pub stage_of: HashMap<u64, usize>,
    pub layouts: Vec<StageLayout>,
    pub buffers: Vec<Buffer>,
    used_names: HashSet<String>,
}

impl<'a> Lowering<'a> {
    fn new(state: &'a State) -> Lowering<'a> {
        let stage_of = state
            .stages()
            .iter()
            .enumerate()
            .map(|(n, s)| (s.tensor.id(), n))
            .collect();
        Lowering {
            state,
            stage_of,
            layouts: Vec::new(),
            buffers: Vec::new(),
            used_names: HashSet::new(),
        }
    }

    /// A variable name not used yet in this function.
    pub fn fresh_name(&mut self, stage: &str, iter: &str) -> String {
        let mut name = iter.to_string();
        if self.used_names.contains(&name) {
            name = format!("{stage}.{iter}");
        }
        let base = name.clone();
        let mut n = 1;
        while self.used_names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        self.used_names.insert(name.clone());
        name
    }

    pub fn add_buffer(&mut self, buffer: Buffer) -> BufferId {
        self.buffers.push(buffer);
        self.buffers.len() - 1
    }

    /// `e` with the rules of inlined stages substituted for their reads.
    pub fn expand_inline(&self, e: &Expr) -> Expr {
        e.rewrite(&mut |x| {
            let ExprKind::Read(t, idx) = x.kind() else {
                return None;
            };
            let stage = &self.state.stages()[*self.stage_of.get(&t.id())?];
            if stage.compute_at != ComputeAt::Inline {
                return None;
            }
            let rule = stage.compute.as_ref()?;
            let idx: Vec<Expr> = idx.iter().map(|i| self.expand_inline(i)).collect();
            let map = rule
                .axes
                .iter()
                .zip(idx)
                .map(|(v, i)| (v.id(), i))
                .collect();
            Some(self.expand_inline(&rule.body.substitute(&map)))
        })
    }
}

fn function_name(state: &State) -> String {
    let label = state.dag().label();
    let base = label.split('[').next().unwrap_or(label);
    if base.is_empty() {
        "main".into()
    } else {
        base.into()
    }
}

/// Lowers `state` to the loop IR, simplified.
pub fn lower(state: &State) -> Result<PrimFunc, LowerError> {
    let func = lower_unsimplified(state)?;
    Ok(passes::simplify_func(func))
}

/// Lowers `state` without the simplification passes (for measuring them).
pub fn lower_unsimplified(state: &State) -> Result<PrimFunc, LowerError> {
    let mut cx = Lowering::new(state);
    cx.compute_layouts();
    let dag = state.dag();
    let mut params = Vec::new();
    for t in dag.inputs().iter().chain(dag.outputs()) {
        let stage = *cx
            .stage_of
            .get(&t.id())
            .ok_or_else(|| LowerError::MissingStage(t.name().into()))?;
        params.push(cx.layouts[stage].buffer.unwrap_or(0));
    }
    let mut body = Vec::new();
    let mut allocations = Vec::new();
    for (index, stage) in state.stages().iter().enumerate() {
        if stage.compute.is_none() || stage.compute_at != ComputeAt::Root {
            continue;
        }
        if !stage.is_output
            && let Some(b) = cx.layouts[index].buffer
        {
            allocations.push(b);
        }
        body.push(cx.emit_stage(index)?);
    }
    let mut root = Stmt::Seq(body);
    for b in allocations.into_iter().rev() {
        root = Stmt::Allocate {
            buffer: b,
            body: Box::new(root),
        };
    }
    Ok(PrimFunc {
        name: function_name(state),
        buffers: cx.buffers,
        params,
        num_inputs: dag.inputs().len(),
        body: root,
    })
}

pub(crate) fn mem_scope(scope: Scope) -> MemScope {
    match scope {
        Scope::Global => MemScope::Global,
        Scope::Local => MemScope::Local,
    }
}
