//! Permuting inputs: a DAG whose placeholders take some inputs in a
//! permuted layout (every read of them permuted to match), and the host-side
//! permutation of a tensor into that layout.

use std::collections::HashMap;

use crate::te::{
    ComputeDag, ComputeOp, Expr, ExprKind, HostData, HostTensor, Tensor, TensorId, placeholder,
};

use super::error::DeployError;

/// Whether `layout` is a permutation of `0..rank`.
pub(crate) fn is_permutation(layout: &[usize], rank: usize) -> bool {
    let mut sorted = layout.to_vec();
    sorted.sort_unstable();
    sorted.iter().copied().eq(0..rank)
}

/// How to rebuild reads: old tensor id → new tensor, and for permuted
/// inputs the layout (new dimension `d` is old dimension `layout[d]`).
struct Rebuild {
    tensors: HashMap<TensorId, Tensor>,
    layouts: HashMap<TensorId, Vec<usize>>,
}

impl Rebuild {
    fn expr(&self, e: &Expr) -> Expr {
        e.rewrite(&mut |node| match node.kind() {
            ExprKind::Read(t, idx) => {
                let idx: Vec<Expr> = idx.iter().map(|i| self.expr(i)).collect();
                let idx = match self.layouts.get(&t.id()) {
                    Some(layout) => layout.iter().map(|&d| idx[d].clone()).collect(),
                    None => idx,
                };
                let tensor = self.tensors.get(&t.id()).unwrap_or(t).clone();
                Some(Expr::new(node.dtype(), ExprKind::Read(tensor, idx)))
            }
            _ => None,
        })
    }
}

/// `dag` with input `i` of each `(i, layout)` taking its data permuted:
/// the placeholder keeps its name, its dimension `d` is the old dimension
/// `layout[d]`, and every read `x[j…]` becomes `x[j_{layout[0]}, …]`. Every
/// compute stage is rebuilt on the new placeholders with the same names and
/// axes, so steps recorded on `dag` name the same stages and loops.
pub(crate) fn permute_inputs(
    dag: &ComputeDag,
    layouts: &[(usize, Vec<usize>)],
) -> Result<ComputeDag, DeployError> {
    let mut rebuild = Rebuild {
        tensors: HashMap::new(),
        layouts: HashMap::new(),
    };
    let mut inputs = Vec::new();
    for (i, input) in dag.inputs().iter().enumerate() {
        let Some((_, layout)) = layouts.iter().find(|(n, _)| *n == i) else {
            inputs.push(input.clone());
            continue;
        };
        if !is_permutation(layout, input.ndim()) {
            return Err(DeployError::BadLayout {
                input: input.name().to_string(),
                layout: layout.clone(),
                rank: input.ndim(),
            });
        }
        let shape: Vec<i64> = layout.iter().map(|&d| input.shape()[d]).collect();
        let packed = placeholder(input.name(), &shape, input.dtype());
        rebuild.tensors.insert(input.id(), packed.clone());
        rebuild.layouts.insert(input.id(), layout.clone());
        inputs.push(packed);
    }
    for stage in dag.stages() {
        let Some(op) = stage.compute_op() else {
            continue;
        };
        let rule = ComputeOp {
            axes: op.axes.clone(),
            body: rebuild.expr(&op.body),
        };
        let tensor = Tensor::from_compute(stage.name(), stage.shape(), rule);
        rebuild.tensors.insert(stage.id(), tensor);
    }
    let outputs: Vec<Tensor> = dag
        .outputs()
        .into_iter()
        .map(|t| rebuild.tensors.get(&t.id()).unwrap_or(t).clone())
        .collect();
    let new = ComputeDag::new(&inputs, &outputs).map_err(|e| DeployError::Rewrite {
        reason: format!("the rewritten DAG does not check: {e}"),
    })?;
    let packed: Vec<String> = layouts
        .iter()
        .filter_map(|(i, layout)| {
            let input = dag.inputs().get(*i)?;
            Some(format!("{}{layout:?}", input.name()))
        })
        .collect();
    Ok(new.with_label(format!("{}+packed({})", dag.label(), packed.join(","))))
}

/// Copies `data` (of `shape`) into the layout where dimension `d` is the
/// old dimension `layout[d]`.
fn permute_vec<T: Copy>(data: &[T], shape: &[usize], layout: &[usize]) -> Vec<T> {
    let rank = shape.len();
    let mut strides = vec![1usize; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    let new_shape: Vec<usize> = layout.iter().map(|&d| shape[d]).collect();
    let new_strides: Vec<usize> = layout.iter().map(|&d| strides[d]).collect();
    let total: usize = shape.iter().product();
    let mut out = Vec::with_capacity(total);
    let mut counter = vec![0usize; rank];
    let mut offset = 0usize;
    for _ in 0..total {
        out.push(data[offset]);
        // Advance the row-major counter over the new shape.
        for d in (0..rank).rev() {
            counter[d] += 1;
            offset += new_strides[d];
            if counter[d] < new_shape[d] {
                break;
            }
            offset -= new_strides[d] * counter[d];
            counter[d] = 0;
        }
    }
    out
}

/// `tensor` permuted into `layout` (dimension `d` of the result is
/// dimension `layout[d]` of `tensor`): what a kernel whose input was laid out
/// ahead of time (see [`rewrite_layouts`](super::rewrite_layouts)) takes.
/// Errors when `layout` is not a permutation of the tensor's dimensions.
pub fn pack_input(tensor: &HostTensor, layout: &[usize]) -> Result<HostTensor, DeployError> {
    let shape = tensor.shape();
    if !is_permutation(layout, shape.len()) {
        return Err(DeployError::BadLayout {
            input: format!("a tensor of shape {shape:?}"),
            layout: layout.to_vec(),
            rank: shape.len(),
        });
    }
    let new_shape: Vec<usize> = layout.iter().map(|&d| shape[d]).collect();
    let data = match tensor.data() {
        HostData::F32(v) => HostData::F32(permute_vec(v, shape, layout)),
        HostData::F64(v) => HostData::F64(permute_vec(v, shape, layout)),
        HostData::I32(v) => HostData::I32(permute_vec(v, shape, layout)),
        HostData::I64(v) => HostData::I64(permute_vec(v, shape, layout)),
        HostData::Bool(v) => HostData::Bool(permute_vec(v, shape, layout)),
    };
    HostTensor::new(&new_shape, data).map_err(|e| DeployError::Rewrite {
        reason: format!("packing failed: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_transposes_and_permutes() {
        let t = HostTensor::from_f32(&[2, 3], vec![0., 1., 2., 3., 4., 5.]).expect("t");
        let p = pack_input(&t, &[1, 0]).expect("packs");
        assert_eq!(p.shape(), &[3, 2]);
        assert_eq!(p.as_f32(), Some(&[0., 3., 1., 4., 2., 5.][..]));
        assert_eq!(pack_input(&t, &[0, 1]).expect("identity"), t);
        let data: Vec<f32> = (0..24).map(|x| x as f32).collect();
        let t = HostTensor::from_f32(&[2, 3, 4], data).expect("t");
        let p = pack_input(&t, &[2, 0, 1]).expect("packs");
        assert_eq!(p.shape(), &[4, 2, 3]);
        // p[c, a, b] = t[a, b, c] = 12a + 4b + c
        let v = p.as_f32().expect("f32");
        assert_eq!(v[(3 * 2 + 1) * 3 + 2], (12 + 8 + 3) as f32);
        assert!(pack_input(&t, &[0, 0, 1]).is_err());
        assert!(pack_input(&t, &[1, 0]).is_err());
    }

    #[test]
    fn scalars_pack_to_themselves() {
        let t = HostTensor::from_f32(&[], vec![7.0]).expect("t");
        assert_eq!(pack_input(&t, &[]).expect("packs"), t);
    }
}
