//! One DAG for a group: the members' DAGs spliced together, each member's
//! placeholder of a tensor the group computes replaced by the stage that
//! computes it.

use std::collections::{HashMap, HashSet};

use crate::graph::ir::Node;
use crate::graph::lower::NodeKernel;
use crate::te::{ComputeDag, ComputeOp, Expr, ExprKind, Tensor, TensorId, Var, placeholder};

/// How a member's DAG tensor is read in the group's DAG.
enum Mapped {
    /// As this tensor, at the same indices.
    Same(Tensor),
    /// As this tensor of the same elements under another shape that differs
    /// only in dimensions of extent 1: `dims[k]` is the position, in the new
    /// tensor, of the old tensor's k-th dimension longer than 1.
    Reindexed {
        tensor: Tensor,
        old_long: Vec<usize>,
        new_long: Vec<usize>,
    },
}

fn long_dims(shape: &[i64]) -> Vec<usize> {
    (0..shape.len()).filter(|&d| shape[d] != 1).collect()
}

fn long_extents(shape: &[i64]) -> Vec<i64> {
    shape.iter().copied().filter(|&e| e != 1).collect()
}

impl Mapped {
    /// The read of this tensor at a member's `indices`, in a stage whose
    /// spatial axes are `reader_axes`. A dimension of extent 1 the member
    /// did not see is read at the reader's own axis there when the reader
    /// spans the same shape (that axis is 0 too), so the read stays an
    /// identity read the sketches can fuse; else at 0.
    fn read(&self, indices: Vec<Expr>, reader_axes: Option<&[Var]>) -> Expr {
        match self {
            Mapped::Same(t) => t.at(indices),
            Mapped::Reindexed {
                tensor,
                old_long,
                new_long,
            } => {
                let mut at: Vec<Expr> = match reader_axes {
                    Some(axes) => axes.iter().map(Var::expr).collect(),
                    None => vec![Expr::i64(0); tensor.ndim()],
                };
                for (&old, &new) in old_long.iter().zip(new_long) {
                    at[new] = indices[old].clone();
                }
                tensor.at(at)
            }
        }
    }
}

/// A unique name among `used`: `name`, else `name_2`, `name_3`, …
fn unique(name: &str, used: &mut HashSet<String>) -> String {
    let mut candidate = name.to_string();
    let mut n = 2;
    while used.contains(&candidate) {
        candidate = format!("{name}_{n}");
        n += 1;
    }
    used.insert(candidate.clone());
    candidate
}

/// The label of a group: the anchor's label with the other members' op
/// names after its operator name (`conv2d_bias+Relu[N=1,…]`).
fn label(anchor: &str, members: &[&Node]) -> String {
    let suffix: String = members
        .iter()
        .map(|n| format!("+{}", n.op.name()))
        .collect();
    match anchor.find('[') {
        Some(at) => format!("{}{suffix}{}", &anchor[..at], &anchor[at..]),
        None => format!("{anchor}{suffix}"),
    }
}

/// The group's kernel from its members' kernels (in graph order, the anchor
/// first). Its inputs are the graph tensors the group reads and does not
/// compute; its output the last member's.
///
/// Errors: why the members cannot be spliced (a tensor computed in the
/// group read under a shape that is not the computed one up to dimensions
/// of extent 1), naming the member.
pub(super) fn compose(nodes: &[&Node], kernels: &[NodeKernel]) -> Result<NodeKernel, String> {
    let mut computed: HashMap<&str, Tensor> = HashMap::new();
    let mut placeholders: Vec<Tensor> = Vec::new();
    let mut bound: Vec<String> = Vec::new();
    let mut shared: HashMap<(String, Vec<i64>), Tensor> = HashMap::new();
    let mut names: HashSet<String> = HashSet::new();
    let mut last_output: Option<Tensor> = None;
    for (node, kernel) in nodes.iter().zip(kernels) {
        let mut map: HashMap<TensorId, Mapped> = HashMap::new();
        for (p, tensor) in kernel.dag.inputs().iter().zip(&kernel.inputs) {
            if let Some(x) = computed.get(tensor.as_str()) {
                let mapped = if x.shape() == p.shape() {
                    Mapped::Same(x.clone())
                } else if long_extents(x.shape()) == long_extents(p.shape()) {
                    Mapped::Reindexed {
                        tensor: x.clone(),
                        old_long: long_dims(p.shape()),
                        new_long: long_dims(x.shape()),
                    }
                } else {
                    return Err(format!(
                        "node '{}' reads '{tensor}' as {:?}, the group computes it as {:?}",
                        node.name,
                        p.shape(),
                        x.shape()
                    ));
                };
                map.insert(p.id(), mapped);
                continue;
            }
            let key = (tensor.clone(), p.shape().to_vec());
            let input = match shared.get(&key) {
                Some(t) => t.clone(),
                None => {
                    let t = placeholder(&unique(p.name(), &mut names), p.shape(), p.dtype());
                    placeholders.push(t.clone());
                    bound.push(tensor.clone());
                    shared.insert(key, t.clone());
                    t
                }
            };
            map.insert(p.id(), Mapped::Same(input));
        }
        for stage in kernel.dag.stages() {
            let Some(op) = stage.compute_op() else {
                continue;
            };
            let body = op.body.rewrite(&mut |e| match e.kind() {
                ExprKind::Read(t, indices) => map.get(&t.id()).map(|m| {
                    let same_shape = match m {
                        Mapped::Reindexed { tensor, .. } => tensor.shape() == stage.shape(),
                        Mapped::Same(_) => false,
                    };
                    m.read(indices.clone(), same_shape.then_some(&op.axes[..]))
                }),
                _ => None,
            });
            let spliced = Tensor::from_compute(
                &unique(stage.name(), &mut names),
                stage.shape(),
                ComputeOp {
                    axes: op.axes.clone(),
                    body,
                },
            );
            map.insert(stage.id(), Mapped::Same(spliced));
        }
        for (out, tensor) in kernel.dag.outputs().iter().zip(&kernel.outputs) {
            if let Some(Mapped::Same(t)) = map.get(&out.id()) {
                computed.insert(tensor.as_str(), t.clone());
                last_output = Some(t.clone());
            }
        }
    }
    let (Some(output), Some(last)) = (last_output, kernels.last()) else {
        return Err("the group has no kernel".into());
    };
    let dag = ComputeDag::new(&placeholders, &[output])
        .map_err(|e| e.to_string())?
        .with_label(label(kernels[0].dag.label(), &nodes[1..]));
    Ok(NodeKernel {
        dag,
        inputs: bound,
        outputs: last.outputs.clone(),
        registry_op: None,
    })
}
