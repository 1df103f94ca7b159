//! The domain of every stage: its loop variables, the value of each root
//! axis, and for stages computed at a loop the region their buffer holds.

use std::collections::{HashMap, HashSet};

use crate::schedule::{ComputeAt, IterId, derive_extents, derive_values};
use crate::te::{Expr, ExprKind, Tensor, Var, VarId};

use super::super::ir::{Buffer, BufferId, MemScope};
use super::bound::dim_region;
use super::{Lowering, mem_scope};

/// How one stage is laid out in the lowered function.
#[derive(Clone, Default)]
pub(crate) struct StageLayout {
    /// The buffer holding the stage (none for inlined stages).
    pub buffer: Option<BufferId>,
    /// Per output dimension, the global index of the buffer's first element.
    pub offsets: Vec<Expr>,
    /// Whether the buffer holds only a region (computed at a loop).
    pub region: bool,
    /// Extent of the domain of each root loop (spatial, then reduction).
    pub domain: Vec<i64>,
    /// The variable of each current loop.
    pub leaf_vars: HashMap<IterId, Var>,
    /// Position of each root in the domain, in terms of the loop variables.
    pub roots: Vec<Expr>,
    /// Extent of every loop of the stage's arena over this domain.
    pub extents: Vec<i64>,
    /// Value of every loop of the arena, in terms of the loop variables.
    pub values: HashMap<IterId, Expr>,
}

impl StageLayout {
    /// The global index of spatial dimension `d` (offset + position).
    pub fn global(&self, d: usize) -> Expr {
        match self.offsets.get(d) {
            Some(o) if o.as_int() != Some(0) => o + &self.roots[d],
            _ => self.roots[d].clone(),
        }
    }
}

impl Lowering<'_> {
    /// Domains in reverse stage order (a host comes after the stages it
    /// hosts), then buffers in stage order.
    pub(crate) fn compute_layouts(&mut self) {
        let stages = self.state.stages();
        self.layouts = vec![StageLayout::default(); stages.len()];
        for index in (0..stages.len()).rev() {
            let stage = &stages[index];
            let Some(rule) = &stage.compute else {
                continue;
            };
            if stage.compute_at == ComputeAt::Inline {
                continue;
            }
            let reduce_extents: Vec<i64> = rule
                .reduction()
                .map(|r| r.axes.iter().map(|a| a.extent()).collect())
                .unwrap_or_default();
            let (offsets, mut domain, region) = match stage.compute_at {
                ComputeAt::At { stage: host, iter } => self.infer_region(index, host, iter),
                _ => (
                    vec![Expr::i64(0); stage.tensor.ndim()],
                    stage.tensor.shape().to_vec(),
                    false,
                ),
            };
            domain.extend(reduce_extents);
            let extents = derive_extents(stage, &domain);
            let mut leaf_vars = HashMap::new();
            for &leaf in &stage.leaves {
                let it = &stage.iters[leaf];
                let name = self.fresh_name(&stage.name, &it.name);
                leaf_vars.insert(leaf, Var::new(name, extents[leaf], it.kind));
            }
            let leaf_exprs = leaf_vars.iter().map(|(&id, v)| (id, v.expr())).collect();
            let values = derive_values(stage, &leaf_exprs, &extents);
            let roots = (0..stage.root_count())
                .map(|r| values.get(&r).cloned().unwrap_or_else(|| Expr::i64(0)))
                .collect();
            self.layouts[index] = StageLayout {
                buffer: None,
                offsets,
                region,
                domain,
                leaf_vars,
                roots,
                extents,
                values,
            };
        }
        for (index, stage) in stages.iter().enumerate() {
            if stage.compute_at == ComputeAt::Inline && stage.compute.is_some() {
                continue;
            }
            let layout = &self.layouts[index];
            let (shape, scope) = if layout.region {
                let spatial = stage.tensor.ndim();
                (layout.domain[..spatial].to_vec(), mem_scope(stage.scope))
            } else if stage.compute.is_none() || stage.is_output {
                (stage.tensor.shape().to_vec(), MemScope::Global)
            } else {
                (stage.tensor.shape().to_vec(), mem_scope(stage.scope))
            };
            let buffer = Buffer::new(&stage.name, &shape, stage.tensor.dtype(), scope);
            let id = self.add_buffer(buffer);
            self.layouts[index].buffer = Some(id);
        }
    }

    /// The region of stage `index` needed by one iteration of loop `iter` of
    /// `host`: per dimension an offset, the extents, and whether it is a region.
    ///
    /// The reads come from the stage's consumers, each of which is `host`
    /// itself or a stage computed (directly or through others) inside `iter`;
    /// every loop inside `iter` — the host's inner loops and all loops of the
    /// stages in between — ranges over its whole extent. The region is the
    /// union of what all of them read.
    fn infer_region(&self, index: usize, host: usize, iter: IterId) -> (Vec<Expr>, Vec<i64>, bool) {
        let stages = self.state.stages();
        let producer = &stages[index].tensor;
        let full = producer.shape().to_vec();
        let whole = (vec![Expr::i64(0); full.len()], full.clone(), false);
        let consumers = self.state.effective_consumers(index);
        if consumers.is_empty() {
            return whole;
        }
        let mut reads: Vec<Vec<Expr>> = Vec::new();
        let mut inner: HashSet<VarId> = HashSet::new();
        for consumer in consumers {
            let Some((consumer_reads, consumer_inner)) =
                self.reads_inside(producer, consumer, host)
            else {
                return whole;
            };
            reads.extend(consumer_reads);
            inner.extend(consumer_inner);
        }
        let host_stage = &stages[host];
        let position = host_stage
            .leaves
            .iter()
            .position(|&l| l == iter)
            .unwrap_or(0);
        inner.extend(
            host_stage.leaves[position + 1..]
                .iter()
                .filter_map(|l| self.layouts[host].leaf_vars.get(l).map(Var::id)),
        );
        let mut offsets = Vec::new();
        let mut extents = Vec::new();
        let mut region = false;
        for (d, &extent) in full.iter().enumerate() {
            let indices: Vec<Expr> = reads.iter().map(|r| r[d].clone()).collect();
            let dim = dim_region(&indices, &inner, extent);
            region |= dim.extent < extent;
            offsets.push(dim.offset);
            extents.push(dim.extent);
        }
        if !region {
            offsets = vec![Expr::i64(0); full.len()];
        }
        (offsets, extents, region)
    }

    /// The indices at which `consumer` reads `producer`, in terms of its loop
    /// variables, and the variables of the loops between it and `host` (its
    /// own and those of the stages it is computed inside, up to `host`);
    /// `None` when it is not computed inside `host`.
    fn reads_inside(
        &self,
        producer: &Tensor,
        consumer: usize,
        host: usize,
    ) -> Option<(Vec<Vec<Expr>>, HashSet<VarId>)> {
        let stages = self.state.stages();
        let (consumer_stage, consumer_layout) = (&stages[consumer], &self.layouts[consumer]);
        let rule = consumer_stage.compute.as_ref()?;
        let mut map: HashMap<VarId, Expr> = HashMap::new();
        let mut inner: HashSet<VarId> = HashSet::new();
        // A consumer computed inside the loop runs all its loops there, so
        // each root axis takes exactly the values of its domain: a fresh
        // variable over it (split factors past the domain are guarded off).
        // The host's own loops outside the loop are fixed: its roots as they are.
        let whole_domain = consumer != host;
        let axes = rule
            .axes
            .iter()
            .chain(rule.reduction().map(|r| r.axes.as_slice()).unwrap_or(&[]));
        for (d, v) in axes.enumerate() {
            let position = if whole_domain {
                let extent = *consumer_layout.domain.get(d)?;
                let fresh = Var::new(format!("{}.{d}", consumer_stage.name), extent, v.kind());
                inner.insert(fresh.id());
                fresh.expr()
            } else {
                consumer_layout.roots.get(d)?.clone()
            };
            let position = match consumer_layout.offsets.get(d) {
                Some(o) if d < rule.axes.len() && o.as_int() != Some(0) => o + &position,
                _ => position,
            };
            map.insert(v.id(), position);
        }
        let mut reads: Vec<Vec<Expr>> = Vec::new();
        self.expand_inline(&rule.body).visit(&mut |e| {
            if let ExprKind::Read(t, idx) = e.kind()
                && t == producer
            {
                reads.push(idx.iter().map(|i| i.substitute(&map)).collect());
            }
        });
        let mut stage = consumer;
        while stage != host {
            inner.extend(self.layouts[stage].leaf_vars.values().map(Var::id));
            match stages[stage].compute_at {
                ComputeAt::At { stage: up, .. } => stage = up,
                _ => return None,
            }
        }
        Some((reads, inner))
    }
}
