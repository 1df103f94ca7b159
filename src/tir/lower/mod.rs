//! Lowering a scheduled [`State`] to a [`PrimFunc`]: the state one lowering
//! carries from pass to pass (the passes themselves are listed in
//! [`pipeline`]).

mod bound;
mod emit;
mod epilogue;
mod layout;
mod pack;
mod pipeline;
mod row_math;
mod stencil;
mod tensorize;

use std::collections::{HashMap, HashSet};

use thiserror::Error;

use crate::schedule::{ComputeAt, Scope, State};
use crate::te::{Expr, ExprKind, TensorId, VarId};

use super::ir::{Buffer, BufferId, MemScope, PrimFunc, Stmt};
use layout::StageLayout;
pub(crate) use pipeline::simplify_body;
pub use pipeline::{AfterPass, LOWERING_PASSES, Pass, lower, lower_traced, lower_unsimplified};

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
    /// Packed loops that cannot be one packing call.
    #[error("cannot pack stage '{stage}': {reason}")]
    Pack {
        /// The stage.
        stage: String,
        /// What does not match, and how to fix it.
        reason: String,
    },
    /// A `row_math` loop that cannot be fissioned.
    #[error("cannot use row math in stage '{stage}': {reason}")]
    RowMath {
        /// The stage.
        stage: String,
        /// What does not fit, and how to fix it.
        reason: String,
    },
}

/// Shared state of one lowering: what the passes read and the function they
/// build.
pub(crate) struct Lowering<'a> {
    pub state: &'a State,
    /// Stage position by the id of its tensor.
    pub stage_of: HashMap<TensorId, usize>,
    pub layouts: Vec<StageLayout>,
    pub buffers: Vec<Buffer>,
    /// The buffers of the DAG's inputs, then outputs.
    pub params: Vec<BufferId>,
    /// The function body built so far.
    pub body: Stmt,
    /// `pragma auto_unroll_max_step` of the stage owning each loop variable
    /// (stages with the pragma only).
    pub auto_unroll: HashMap<VarId, u32>,
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
            params: Vec::new(),
            body: Stmt::nop(),
            auto_unroll: HashMap::new(),
            used_names: HashSet::new(),
        }
    }

    /// The buffer of every DAG input and output, in parameter order.
    fn bind_params(&mut self) -> Result<(), LowerError> {
        let dag = self.state.dag();
        let mut params = Vec::new();
        for t in dag.inputs().iter().chain(dag.outputs()) {
            let stage = *self
                .stage_of
                .get(&t.id())
                .ok_or_else(|| LowerError::MissingStage(t.name().into()))?;
            params.push(self.layouts[stage].buffer.unwrap_or(0));
        }
        self.params = params;
        Ok(())
    }

    /// The function as built so far (for printing between passes).
    fn snapshot(&self) -> PrimFunc {
        assemble(
            self.state,
            self.buffers.clone(),
            self.params.clone(),
            self.body.clone(),
        )
    }

    /// The function built.
    fn into_func(self) -> PrimFunc {
        assemble(self.state, self.buffers, self.params, self.body)
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

/// The function of `state`, named after its DAG.
fn assemble(state: &State, buffers: Vec<Buffer>, params: Vec<BufferId>, body: Stmt) -> PrimFunc {
    let label = state.dag().label();
    let base = label.split('[').next().unwrap_or(label);
    PrimFunc {
        name: if base.is_empty() { "main" } else { base }.into(),
        buffers,
        params,
        num_inputs: state.dag().inputs().len(),
        body,
    }
}

pub(crate) fn mem_scope(scope: Scope) -> MemScope {
    match scope {
        Scope::Global => MemScope::Global,
        Scope::Local => MemScope::Local,
    }
}
