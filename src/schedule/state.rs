//! `State`: a DAG plus the loop structure and placement of every stage, as
//! produced by replaying a step list.

use std::collections::HashSet;
use std::fmt::Write;
use std::sync::Arc;

use crate::te::{ComputeDag, ComputeOp, ExprKind, IterKind, Tensor, TensorOp};

use super::step::{Annotation, Step};

/// Index of a loop in a stage's loop arena ([`Stage::iters`]).
pub type IterId = usize;

/// One loop of a stage (current or replaced by a later split/fuse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IterNode {
    /// Unique within the stage: `i0`, `i0.1`, `i0.0@i1.0`, `k`.
    pub name: String,
    /// Spatial or reduction.
    pub kind: IterKind,
    /// The extent when the stage computes its whole domain.
    pub extent: i64,
    /// How the loop is run.
    pub annotation: Annotation,
}

/// How loops derive from one another, as in TVM's schedule relations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Relation {
    /// `parent = ((children[0] · f₁ + children[1]) · f₂ + children[2]) …`
    Split {
        /// The split loop.
        parent: IterId,
        /// Outer to inner.
        children: Vec<IterId>,
        /// Extents of `children[1..]`.
        factors: Vec<i64>,
    },
    /// `fused` enumerates `parents` in row-major order.
    Fuse {
        /// Outer to inner.
        parents: Vec<IterId>,
        /// The fused loop.
        fused: IterId,
    },
}

/// Where a stage is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComputeAt {
    /// In its own loop nest at the top level, over its whole domain.
    Root,
    /// Substituted into its consumers; no loops of its own.
    Inline,
    /// Inside loop `iter` of stage `stage`, over the region one iteration needs.
    At {
        /// The host stage (index in [`State::stages`]).
        stage: usize,
        /// The host loop.
        iter: IterId,
    },
}

/// A tensorized block: the loops from `iter` inward become one call of the
/// micro-kernel `kernel`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tensorized {
    /// The block's outermost loop.
    pub iter: IterId,
    /// The micro-kernel's name.
    pub kernel: String,
}

/// Row math: the f32 transcendental calls of the innermost vectorised loop
/// `iter` run through the row primitives of `isa` (the `row_math` step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowMath {
    /// The loop (the stage's innermost, vectorised).
    pub iter: IterId,
    /// The instruction set of the row primitives.
    pub isa: crate::runtime::micro_kernels::Isa,
}

/// A packed copy: the copy stage's two innermost loops, from `iter`
/// inward, run as one call of the packing routine of `isa` (the `pack`
/// step).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packed {
    /// The outer of the two loops.
    pub iter: IterId,
    /// The instruction set of the packing routine.
    pub isa: crate::runtime::micro_kernels::Isa,
}

/// Where a stage's buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// An argument or a function-level buffer.
    Global,
    /// A local buffer (made by cache_write / cache_read), a candidate for registers.
    Local,
}

/// One stage: an input or a computation, with its loops and placement.
#[derive(Clone)]
pub struct Stage {
    /// Unique stage name (`C`, `C.local`, `C.rf`).
    pub name: String,
    /// Identity handle: reads in rules refer to this tensor; shape and dtype.
    pub tensor: Tensor,
    /// The rule, authoritative (it may differ from `tensor`'s original rule
    /// after cache_write, cache_read or rfactor). `None` for inputs.
    pub compute: Option<ComputeOp>,
    /// Where the buffer lives.
    pub scope: Scope,
    /// Every loop ever created for this stage; the first are the roots (one
    /// per spatial axis, then one per reduction axis).
    pub iters: Vec<IterNode>,
    /// How non-root loops derive from others, in creation order.
    pub relations: Vec<Relation>,
    /// The current loops, outer to inner.
    pub leaves: Vec<IterId>,
    /// Where the stage is computed.
    pub compute_at: ComputeAt,
    /// `pragma auto_unroll_max_step` (0: off).
    pub auto_unroll_max_step: u32,
    /// The block replaced by a micro-kernel call (the `tensorize` step).
    pub tensorize: Option<Tensorized>,
    /// The loop whose transcendental calls run through row primitives (the
    /// `row_math` step).
    pub row_math: Option<RowMath>,
    /// The loops run as one packing call (the `pack` step).
    pub pack: Option<Packed>,
    /// Whether the stage is an output of the DAG.
    pub is_output: bool,
}

impl Stage {
    /// Number of spatial root loops (the output rank).
    pub fn spatial_roots(&self) -> usize {
        self.compute.as_ref().map_or(0, |c| c.axes.len())
    }

    /// Number of root loops (spatial then reduction).
    pub fn root_count(&self) -> usize {
        self.compute.as_ref().map_or(0, |c| {
            c.axes.len() + c.reduction().map_or(0, |r| r.axes.len())
        })
    }

    /// Whether the rule is a reduction.
    pub fn is_reduction(&self) -> bool {
        self.compute
            .as_ref()
            .is_some_and(|c| c.reduction().is_some())
    }

    /// The loop called `name` among the current loops.
    pub fn leaf_named(&self, name: &str) -> Option<IterId> {
        self.leaves
            .iter()
            .copied()
            .find(|&id| self.iters[id].name == name)
    }

    /// The current loop names, comma-separated.
    pub fn leaf_names(&self) -> String {
        self.leaves
            .iter()
            .map(|&id| self.iters[id].name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Whether the stage reads `tensor` in its current rule.
    pub fn reads(&self, tensor: &Tensor) -> bool {
        self.compute.as_ref().is_some_and(|c| {
            c.body
                .any(&mut |e| matches!(e.kind(), ExprKind::Read(t, _) if t == tensor))
        })
    }
}

/// A DAG and the loop structure of each stage after a list of steps.
#[derive(Clone)]
pub struct State {
    dag: Arc<ComputeDag>,
    pub(crate) stages: Vec<Stage>,
    pub(crate) steps: Vec<Step>,
}

/// `base`, or `base_1`, `base_2`, … — the first name `taken` rejects not.
pub(crate) fn unique_name(base: &str, taken: impl Fn(&str) -> bool) -> String {
    if !taken(base) {
        return base.to_string();
    }
    (1..)
        .map(|n| format!("{base}_{n}"))
        .find(|candidate| !taken(candidate))
        .unwrap_or_else(|| base.to_string())
}

/// Root loops for a rule: one per spatial axis then one per reduction axis,
/// with names made unique within the stage.
pub(crate) fn root_iters(op: &ComputeOp) -> Vec<IterNode> {
    let mut taken = HashSet::new();
    let reduce_axes = op.reduction().map(|r| r.axes.clone()).unwrap_or_default();
    op.axes
        .iter()
        .chain(&reduce_axes)
        .map(|v| {
            let name = unique_name(v.name(), |n| taken.contains(n));
            taken.insert(name.clone());
            IterNode {
                name,
                kind: v.kind(),
                extent: v.extent(),
                annotation: Annotation::None,
            }
        })
        .collect()
}

impl State {
    /// The initial state: every stage at the root with its natural loops.
    pub fn new(dag: &ComputeDag) -> State {
        let outputs: Vec<usize> = dag.output_positions().to_vec();
        let mut taken = HashSet::new();
        let stages = dag
            .tensors()
            .iter()
            .enumerate()
            .map(|(position, t)| {
                let name = unique_name(t.name(), |n| taken.contains(n));
                taken.insert(name.clone());
                let compute = match t.op() {
                    TensorOp::Compute(op) => Some(op.clone()),
                    TensorOp::Placeholder => None,
                };
                Stage::fresh(
                    name,
                    t.clone(),
                    compute,
                    Scope::Global,
                    outputs.contains(&position),
                )
            })
            .collect();
        State {
            dag: Arc::new(dag.clone()),
            stages,
            steps: Vec::new(),
        }
    }

    /// The DAG the state schedules.
    pub fn dag(&self) -> &ComputeDag {
        &self.dag
    }

    /// The stages in topological order (inputs first).
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The steps applied so far.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The position of the stage called `name`.
    pub fn stage_index(&self, name: &str) -> Option<usize> {
        self.stages.iter().position(|s| s.name == name)
    }

    /// The stage names, comma-separated.
    pub fn stage_names(&self) -> String {
        self.stages
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The stages whose rules read stage `index` directly.
    pub fn direct_consumers(&self, index: usize) -> Vec<usize> {
        let tensor = &self.stages[index].tensor;
        (0..self.stages.len())
            .filter(|&s| s != index && self.stages[s].reads(tensor))
            .collect()
    }

    /// The non-inlined stages that read stage `index`, looking through inlined ones.
    pub fn effective_consumers(&self, index: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut pending = self.direct_consumers(index);
        let mut seen = HashSet::new();
        while let Some(c) = pending.pop() {
            if !seen.insert(c) {
                continue;
            }
            if self.stages[c].compute_at == ComputeAt::Inline {
                pending.extend(self.direct_consumers(c));
            } else {
                out.push(c);
            }
        }
        out.sort_unstable();
        out
    }

    /// The stages computed at a loop of stage `index`.
    pub fn attached_to(&self, index: usize) -> Vec<usize> {
        (0..self.stages.len())
            .filter(|&s| matches!(self.stages[s].compute_at, ComputeAt::At { stage, .. } if stage == index))
            .collect()
    }

    /// A readable form: each stage with its placement and loops, e.g.
    /// `C.local @ C.j.0: i0 i1 k.0 k.1(unroll)`.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        for stage in &self.stages {
            let placement = match stage.compute_at {
                _ if stage.compute.is_none() => "input".to_string(),
                ComputeAt::Root => "root".to_string(),
                ComputeAt::Inline => "inline".to_string(),
                ComputeAt::At { stage: host, iter } => {
                    let host = &self.stages[host];
                    format!("at {}.{}", host.name, host.iters[iter].name)
                }
            };
            let _ = write!(out, "{} [{placement}]", stage.name);
            if stage.scope == Scope::Local {
                out.push_str(" local");
            }
            if stage.auto_unroll_max_step > 0 {
                let _ = write!(out, " auto_unroll_max_step={}", stage.auto_unroll_max_step);
            }
            if stage.compute.is_some() && stage.compute_at != ComputeAt::Inline {
                out.push(':');
                for &id in &stage.leaves {
                    let it = &stage.iters[id];
                    let _ = write!(out, " {}({}", it.name, it.extent);
                    if it.annotation != Annotation::None {
                        let _ = write!(out, ",{}", it.annotation.name());
                    }
                    if let Some(t) = stage.tensorize.as_ref().filter(|t| t.iter == id) {
                        let _ = write!(out, ",tensorize {}", t.kernel);
                    }
                    if let Some(r) = stage.row_math.as_ref().filter(|r| r.iter == id) {
                        let _ = write!(out, ",row_math {}", r.isa);
                    }
                    if let Some(p) = stage.pack.as_ref().filter(|p| p.iter == id) {
                        let _ = write!(out, ",pack {}", p.isa);
                    }
                    out.push(')');
                }
            }
            out.push('\n');
        }
        out
    }
}

impl Stage {
    pub(crate) fn fresh(
        name: String,
        tensor: Tensor,
        compute: Option<ComputeOp>,
        scope: Scope,
        is_output: bool,
    ) -> Stage {
        let iters = compute.as_ref().map(root_iters).unwrap_or_default();
        let leaves = (0..iters.len()).collect();
        Stage {
            name,
            tensor,
            compute,
            scope,
            iters,
            relations: Vec::new(),
            leaves,
            compute_at: ComputeAt::Root,
            auto_unroll_max_step: 0,
            tensorize: None,
            row_math: None,
            pack: None,
            is_output,
        }
    }

    /// The root loop each current or past loop derives from, if it derives
    /// from exactly one root through splits only.
    pub fn split_root(&self, mut id: IterId) -> Option<IterId> {
        loop {
            if id < self.root_count() {
                return Some(id);
            }
            let parent = self.relations.iter().find_map(|r| match r {
                Relation::Split {
                    parent, children, ..
                } if children.contains(&id) => Some(Some(*parent)),
                Relation::Fuse { fused, .. } if *fused == id => Some(None),
                _ => None,
            })?;
            id = parent?;
        }
    }
}
