//! The stages as the sketch rules see them: each compute stage of the DAG
//! with what its rules ask about it — is it inlinable, does its reduction
//! reuse data, which inputs would packing copy, and which elementwise
//! consumer tiling with fusion would take over.

use crate::te::{ComputeDag, ComputeOp, Expr, ExprKind, Tensor, Var};

/// One compute stage and the facts the rules' conditions read.
pub(super) struct Stage {
    /// The stage's name.
    pub name: String,
    /// What it computes.
    pub op: ComputeOp,
    /// Whether it is an output of the DAG.
    pub is_output: bool,
    /// Its only effective consumer, when that is an elementwise output
    /// over the same axes reading it elementwise (bias + ReLU after dense)
    /// and the stage is a reduction with data reuse: tiling with fusion
    /// computes the stage per tile of it.
    pub fusible_consumer: Option<FusibleConsumer>,
    /// Its only effective consumer, when that is not inlined and reads the
    /// stage at its own leading axes (`row_max[i]` in `exp[i, j]`), with
    /// the consumer's loop over the stage's last axis: the stage may be
    /// computed there, one row per iteration, while the row is in cache.
    pub row_consumer: Option<RowConsumer>,
    /// Read by some consumer at indices that miss one of that consumer's
    /// axes (`row_inv[i]` in `softmax[i, j]`): inlined, each element would
    /// be computed once per element of the consumer instead of once.
    pub broadcast: bool,
    /// The stages this one may compute inside its row loop, one row per
    /// iteration (see [`row_fusion_members`]).
    pub row_fusion: Option<RowFusion>,
    /// Its only effective consumer, when the stage is a padding (it
    /// selects) that the consumer reads through a window: its leading
    /// indices are the consumer's own leading axes, each later index uses
    /// the consumer's axis of the same position (with reduction axes). The
    /// stage may then be computed inside the consumer's loops, a plane or a
    /// window of rows at a time, while those are in cache.
    pub window_consumer: Option<WindowConsumer>,
    /// The DAG's inputs that are constant weights, laid out once ahead of
    /// time (a model task's weights, `--constants`): a copy of one costs
    /// nothing per run, a copy of any other input is paid on every run.
    pub constant_inputs: Vec<String>,
}

/// A chain of producers computed one row at a time inside a stage's row loop.
pub(super) struct RowFusion {
    /// The stage's loop over its last leading axis (not its innermost).
    pub row_loop: String,
    /// The producers, each before the stages it reads (consumers first:
    /// the order in which compute_at is legal).
    pub members: Vec<String>,
}

/// The consumer a padding stage may be computed in, part by part.
pub(super) struct WindowConsumer {
    /// Its name.
    pub name: String,
    /// Its loop over the last axis it reads the stage at directly (a plane:
    /// the channel of an NCHW window).
    pub plane_loop: String,
    /// Its loop over the first windowed axis, when a windowed axis follows
    /// it (the rows of a 2-D window).
    pub row_loop: Option<String>,
}

/// The consumer a stage may be computed in, one row at a time.
pub(super) struct RowConsumer {
    /// Its name.
    pub name: String,
    /// Its loop over the producer's last axis (not its own innermost).
    pub row_loop: String,
}

/// The consumer that tiling with fusion schedules together with its producer.
pub(super) struct FusibleConsumer {
    /// Its name.
    pub name: String,
    /// Its axis names, in order (one to one with the producer's axes).
    pub axes: Vec<String>,
}

impl Stage {
    /// Elementwise, not an output, and calling no math intrinsic: its
    /// consumers may compute it in place (always, or as an alternative).
    pub fn inlinable(&self) -> bool {
        self.op.reduction().is_none() && !self.is_output && !calls_intrinsic(&self.op)
    }

    /// Inlinable, selecting nothing and read once per element it computes:
    /// always inlined.
    pub fn always_inlined(&self) -> bool {
        self.inlinable() && !self.has_select() && !self.broadcast
    }

    /// Whether its body selects (padding): inlined, the select would run in
    /// its consumer's innermost loop, so computing it at the root is tried too.
    pub fn has_select(&self) -> bool {
        self.op
            .body
            .any(&mut |e| matches!(e.kind(), ExprKind::Select { .. }))
    }

    /// A reduction some of whose reads ignore an output axis: tiling reuses them.
    pub fn has_data_reuse(&self) -> bool {
        self.op.reduction().is_some()
            && reads_of(&self.op)
                .iter()
                .any(|(_, idx)| misses_an_axis(&self.op, idx))
    }

    /// A reduction with one output axis longer than 1 (a matrix-vector
    /// product, `y[n] = Σ W[n, k]·x[k]`): only the short operand is reused,
    /// the long one is streamed once, so tiling is no better a bet than a
    /// reduction vectorized along its contiguous axis.
    pub fn is_matrix_vector(&self) -> bool {
        self.op.reduction().is_some() && self.op.axes.iter().filter(|a| a.extent() > 1).count() == 1
    }

    /// The spatial axes, (name, extent), in order.
    pub fn spatial_axes(&self) -> Vec<(String, i64)> {
        self.op
            .axes
            .iter()
            .map(|a| (a.name().to_string(), a.extent()))
            .collect()
    }

    /// The reduction axes, (name, extent), in order (none for a non-reduction).
    pub fn reduce_axes(&self) -> Vec<(String, i64)> {
        self.op
            .reduction()
            .map(|r| {
                r.axes
                    .iter()
                    .map(|a| (a.name().to_string(), a.extent()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Inputs (placeholders) that the stage reads at indices missing one of
    /// its spatial axes (each element is reused, so packing them pays), with
    /// the spatial axes their indices do use.
    pub fn packable_inputs(&self) -> Vec<(String, Vec<String>)> {
        let op = &self.op;
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for (t, idx) in reads_of(op) {
            if t.compute_op().is_none()
                && misses_an_axis(op, &idx)
                && !out.iter().any(|(n, _)| n == t.name())
            {
                let used = op
                    .axes
                    .iter()
                    .filter(|axis| uses(&idx, axis))
                    .map(|axis| axis.name().to_string())
                    .collect();
                out.push((t.name().to_string(), used));
            }
        }
        out
    }
}

/// The compute stages of `dag`, in DAG order.
pub(super) fn stages_of(dag: &ComputeDag) -> Vec<Stage> {
    let tensors: Vec<Tensor> = dag
        .stages()
        .iter()
        .filter(|t| t.compute_op().is_some())
        .cloned()
        .collect();
    let mut stages: Vec<Stage> = tensors
        .iter()
        .filter_map(|t| {
            Some(Stage {
                name: t.name().to_string(),
                op: t.compute_op()?.clone(),
                is_output: dag.outputs().contains(&t),
                fusible_consumer: None,
                row_consumer: None,
                broadcast: false,
                row_fusion: None,
                window_consumer: None,
                constant_inputs: Vec::new(),
            })
        })
        .collect();
    let consumers: Vec<Vec<usize>> = (0..stages.len())
        .map(|i| {
            (0..stages.len())
                .filter(|&j| {
                    j != i
                        && reads_of(&stages[j].op)
                            .iter()
                            .any(|(t, _)| *t == tensors[i])
                })
                .collect()
        })
        .collect();
    for i in 0..stages.len() {
        let broadcast = consumers[i].iter().any(|&c| {
            reads_of(&stages[c].op)
                .iter()
                .any(|(t, idx)| *t == tensors[i] && misses_an_axis(&stages[c].op, idx))
        });
        stages[i].broadcast = broadcast;
    }
    // Consumers through always-inlined stages: the effective readers of
    // each stage, and whether every link reads its producer elementwise.
    let effective_consumers = |i: usize| -> Vec<(usize, bool)> {
        let mut out: Vec<(usize, bool)> = Vec::new();
        let mut stack: Vec<(usize, usize, bool)> =
            consumers[i].iter().map(|&c| (i, c, true)).collect();
        while let Some((from, c, identity)) = stack.pop() {
            let identity = identity
                && tensors[c].shape() == tensors[from].shape()
                && reads_identity(&stages[c].op, &tensors[from]);
            if stages[c].always_inlined() {
                stack.extend(consumers[c].iter().map(|&n| (c, n, identity)));
            } else if !out.iter().any(|(o, _)| *o == c) {
                out.push((c, identity));
            }
        }
        out
    };
    let fusible: Vec<Option<FusibleConsumer>> = (0..stages.len())
        .map(|i| {
            if !stages[i].has_data_reuse() {
                return None;
            }
            match effective_consumers(i).as_slice() {
                [(c, true)] if stages[*c].is_output && stages[*c].op.reduction().is_none() => {
                    Some(FusibleConsumer {
                        name: stages[*c].name.clone(),
                        axes: stages[*c]
                            .op
                            .axes
                            .iter()
                            .map(|a| a.name().to_string())
                            .collect(),
                    })
                }
                _ => None,
            }
        })
        .collect();
    let row_consumers: Vec<Option<RowConsumer>> = (0..stages.len())
        .map(|i| match effective_consumers(i).as_slice() {
            [(c, _)] if !stages[*c].always_inlined() && !stages[i].is_output => {
                let rank = tensors[i].shape().len();
                let axes = &stages[*c].op.axes;
                (rank >= 1
                    && rank < axes.len()
                    && reads_leading_axes(&stages[*c].op, &tensors[i], rank))
                .then(|| RowConsumer {
                    name: stages[*c].name.clone(),
                    row_loop: axes[rank - 1].name().to_string(),
                })
            }
            _ => None,
        })
        .collect();
    let window_consumers: Vec<Option<WindowConsumer>> = (0..stages.len())
        .map(|i| match effective_consumers(i).as_slice() {
            [(c, _)]
                if stages[i].inlinable()
                    && stages[i].has_select()
                    && !stages[*c].inlinable()
                    && !stages[*c].has_data_reuse() =>
            {
                window_consumer(&stages[*c], &tensors[i])
            }
            _ => None,
        })
        .collect();
    for (((stage, consumer), row), window) in stages
        .iter_mut()
        .zip(fusible)
        .zip(row_consumers)
        .zip(window_consumers)
    {
        stage.fusible_consumer = consumer;
        stage.row_consumer = row;
        stage.window_consumer = window;
    }
    let row_fusions: Vec<Option<RowFusion>> = (0..stages.len())
        .map(|host| row_fusion_members(&stages, &tensors, &consumers, host))
        .collect();
    for (stage, fusion) in stages.iter_mut().zip(row_fusions) {
        stage.row_fusion = fusion;
    }
    stages
}

/// The producers stage `host` may compute inside its row loop (over its
/// leading axes but the last, `R` of them), when they make a row
/// normalisation: walking back from `host`, a stage joins when it is not
/// inlined, not an output, reuses no data (no matrix product), has at least
/// `R` axes, and every stage that reads it is `host` or a member reading it
/// at its own first `R` axes, in order — so one iteration of the row loop
/// needs one row of it. At least two join, one a reduction over the row
/// (`R` axes: `row_max`, `mean`); otherwise `None`.
fn row_fusion_members(
    stages: &[Stage],
    tensors: &[Tensor],
    consumers: &[Vec<usize>],
    host: usize,
) -> Option<RowFusion> {
    let axes = &stages[host].op.axes;
    if axes.len() < 2 || stages[host].always_inlined() {
        return None;
    }
    let rows = axes.len() - 1;
    let mut members: Vec<usize> = Vec::new();
    for p in (0..host).rev() {
        let stage = &stages[p];
        let joins = !stage.is_output
            && !stage.always_inlined()
            && !stage.has_select()
            && !stage.has_data_reuse()
            && tensors[p].ndim() >= rows
            && !consumers[p].is_empty()
            && consumers[p].iter().all(|&c| {
                (c == host || members.contains(&c))
                    && reads_with_leading_axes(&stages[c].op, &tensors[p], rows, false)
            });
        if joins {
            members.push(p);
        }
    }
    let row_reduction = members
        .iter()
        .any(|&m| stages[m].op.reduction().is_some() && tensors[m].ndim() == rows);
    (members.len() >= 2 && row_reduction).then(|| RowFusion {
        row_loop: axes[rows - 1].name().to_string(),
        members: members.iter().map(|&m| stages[m].name.clone()).collect(),
    })
}

/// Whether every read of `producer` in `consumer` is at the consumer's
/// first `rank` axes, in order.
fn reads_leading_axes(consumer: &ComputeOp, producer: &Tensor, rank: usize) -> bool {
    reads_with_leading_axes(consumer, producer, rank, true)
}

/// Whether every read of `producer` in `consumer` has the consumer's first
/// `rank` axes as its first indices, in order (and no other index when
/// `exactly`).
fn reads_with_leading_axes(
    consumer: &ComputeOp,
    producer: &Tensor,
    rank: usize,
    exactly: bool,
) -> bool {
    let reads: Vec<_> = reads_of(consumer)
        .into_iter()
        .filter(|(t, _)| t == producer)
        .collect();
    !reads.is_empty()
        && consumer.axes.len() >= rank
        && reads.iter().all(|(_, idx)| {
            (idx.len() == rank || (!exactly && idx.len() > rank))
                && idx[..rank]
                    .iter()
                    .zip(&consumer.axes)
                    .all(|(i, a)| matches!(i.kind(), ExprKind::Var(v) if v.id() == a.id()))
        })
}

/// The loops of `consumer` to compute `producer` at, when every read of it
/// is through a window (see [`Stage::window_consumer`]).
fn window_consumer(consumer: &Stage, producer: &Tensor) -> Option<WindowConsumer> {
    let axes = &consumer.op.axes;
    let reads: Vec<_> = reads_of(&consumer.op)
        .into_iter()
        .filter(|(t, _)| t == producer)
        .collect();
    let direct = |idx: &[Expr]| {
        idx.iter()
            .zip(axes)
            .take_while(|(i, a)| matches!(i.kind(), ExprKind::Var(v) if v.id() == a.id()))
            .count()
    };
    let leading = reads.iter().map(|(_, idx)| direct(idx)).min()?;
    let windowed = |idx: &[Expr]| {
        idx.len() == axes.len()
            && idx.iter().enumerate().skip(leading).all(|(d, i)| {
                axes.iter()
                    .enumerate()
                    .all(|(a, axis)| uses(std::slice::from_ref(i), axis) == (a == d))
            })
    };
    let through_window =
        leading >= 1 && leading < axes.len() && reads.iter().all(|(_, idx)| windowed(idx));
    through_window.then(|| WindowConsumer {
        name: consumer.name.clone(),
        plane_loop: axes[leading - 1].name().to_string(),
        row_loop: (leading + 1 < axes.len()).then(|| axes[leading].name().to_string()),
    })
}

/// Whether `op` is a float reduction whose innermost reduction axis, in
/// every read that uses it, is the last index alone (consecutive elements).
pub(super) fn reduces_contiguously(op: &ComputeOp) -> bool {
    let Some(reduction) = op.reduction() else {
        return false;
    };
    let Some(inner) = reduction.axes.last() else {
        return false;
    };
    let reads = reads_of(op);
    let used: Vec<_> = reads.iter().filter(|(_, idx)| uses(idx, inner)).collect();
    op.body.dtype().is_float()
        && !used.is_empty()
        && used.iter().all(|(_, idx)| match idx.split_last() {
            Some((last, rest)) => {
                !uses(rest, inner)
                    && matches!(last.kind(), ExprKind::Var(v) if v.id() == inner.id())
            }
            None => false,
        })
}

fn reads_of(op: &ComputeOp) -> Vec<(Tensor, Vec<Expr>)> {
    let mut out = Vec::new();
    op.body.visit(&mut |e| {
        if let ExprKind::Read(t, idx) = e.kind() {
            out.push((t.clone(), idx.clone()));
        }
    });
    out
}

fn calls_intrinsic(op: &ComputeOp) -> bool {
    op.body.any(&mut |e| matches!(e.kind(), ExprKind::Call(..)))
}

/// Whether the indices `idx` ignore one of `op`'s spatial axes (of extent
/// > 1): every element read is then reused across that axis.
fn misses_an_axis(op: &ComputeOp, idx: &[Expr]) -> bool {
    op.axes
        .iter()
        .filter(|a| a.extent() > 1)
        .any(|axis| !uses(idx, axis))
}

/// The two tensor reads (tensor, indices) of an f32 sum of their product,
/// when `op` is one and they read different tensors.
pub(super) fn sum_of_product(op: &ComputeOp) -> Option<[(Tensor, Vec<Expr>); 2]> {
    let reduction = op.reduction()?;
    if reduction.op != crate::te::ReduceOp::Sum || reduction.source.dtype() != crate::te::DType::F32
    {
        return None;
    }
    let ExprKind::Binary(crate::te::BinOp::Mul, x, y) = reduction.source.kind() else {
        return None;
    };
    let read = |e: &Expr| match e.kind() {
        ExprKind::Read(t, idx) => Some((t.clone(), idx.clone())),
        _ => None,
    };
    let (x, y) = (read(x)?, read(y)?);
    (x.0 != y.0).then_some([x, y])
}

/// Whether any of the indices `idx` mentions `axis`.
pub(super) fn uses(idx: &[Expr], axis: &Var) -> bool {
    idx.iter()
        .any(|i| i.any(&mut |e| matches!(e.kind(), ExprKind::Var(v) if v.id() == axis.id())))
}

/// Reads `producer` at exactly its own axes, in order (an elementwise use).
fn reads_identity(consumer: &ComputeOp, producer: &Tensor) -> bool {
    reads_leading_axes(consumer, producer, consumer.axes.len())
}
