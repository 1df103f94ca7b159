//! Which inputs a kernel's output may overwrite: those its DAG reads only at
//! the index it writes (whatever the node's op: a fused group's anchor may
//! be a convolution).

use std::collections::HashSet;

use crate::te::{ComputeDag, ExprKind, TensorId, VarId};

/// Whether `dag`'s single output may be written over its input `input`
/// (a position in `dag.inputs()`) whatever the schedule.
///
/// It may when the input has the output's shape and dtype (up to dimensions
/// of extent 1), and every stage that depends on the input (directly or
/// through another stage) has the output's shape, reduces nothing, and reads
/// the input and those stages only at its own index (its own loop variables,
/// in order, over the dimensions longer than 1). Then each output element `i` is computed from
/// input element `i` alone, read before `i` is written, under any loop
/// order, tiling, `compute_at` or inlining; stages that do not depend on the
/// input (a per-channel scale) may be read anywhere.
pub fn reads_only_at_output_index(dag: &ComputeDag, input: usize) -> bool {
    let outputs = dag.outputs();
    let (Some(target), [output]) = (dag.inputs().get(input), outputs.as_slice()) else {
        return false;
    };
    if squeezed(target.shape()) != squeezed(output.shape()) || target.dtype() != output.dtype() {
        return false;
    }
    let mut dependent: HashSet<TensorId> = HashSet::from([target.id()]);
    for stage in dag.stages() {
        let Some(compute) = stage.compute_op() else {
            return false;
        };
        let mut reads_dependent = false;
        let mut at_own_index = true;
        // The stage's loop variables over its dimensions longer than 1.
        let own: Vec<VarId> = compute
            .axes
            .iter()
            .zip(stage.shape())
            .filter(|(_, extent)| **extent != 1)
            .map(|(axis, _)| axis.id())
            .collect();
        compute.body.visit(&mut |e| {
            if let ExprKind::Read(tensor, indices) = e.kind()
                && dependent.contains(&tensor.id())
            {
                reads_dependent = true;
                // Dimensions of extent 1 are read at 0 whatever the index
                // says; the others must be the stage's own variables, in
                // order: then the read and the write are at the same
                // row-major offset.
                let read: Vec<Option<VarId>> = indices
                    .iter()
                    .zip(tensor.shape())
                    .filter(|(_, extent)| **extent != 1)
                    .map(|(index, _)| index.as_var().map(|v| v.id()))
                    .collect();
                at_own_index &= indices.len() == tensor.ndim()
                    && read.len() == own.len()
                    && read.iter().zip(&own).all(|(r, o)| *r == Some(*o));
            }
        });
        if !reads_dependent {
            continue;
        }
        let elementwise =
            stage.shape() == output.shape() && !matches!(compute.body.kind(), ExprKind::Reduce(_));
        if !(elementwise && at_own_index) {
            return false;
        }
        dependent.insert(stage.id());
    }
    dependent.contains(&output.id())
}

/// `shape` without its dimensions of extent 1.
fn squeezed(shape: &[i64]) -> Vec<i64> {
    shape.iter().copied().filter(|&d| d != 1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::{DType, compute, placeholder, reduce_axis};

    #[test]
    fn an_elementwise_dag_may_overwrite_its_input() {
        let x = placeholder("x", &[4, 8], DType::F32);
        let y = compute("y", &[4, 8], |i| x.at([&i[0], &i[1]]) * 2.0);
        let dag = ComputeDag::new(&[x], &[y]).expect("dag");
        assert!(reads_only_at_output_index(&dag, 0));
    }

    #[test]
    fn dimensions_of_extent_one_do_not_matter() {
        // A [1, 4, 8] output from a [4, 8] placeholder (the lowering drops
        // broadcast dimensions of extent 1).
        let x = placeholder("x", &[4, 8], DType::F32);
        let y = compute("y", &[1, 4, 8], |i| x.at([&i[1], &i[2]]) + 1.0);
        let dag = ComputeDag::new(std::slice::from_ref(&x), &[y]).expect("dag");
        assert!(reads_only_at_output_index(&dag, 0));
        // Transposed (both dimensions longer than 1): refused.
        let x = placeholder("x", &[4, 4], DType::F32);
        let y = compute("y", &[1, 4, 4], |i| x.at([&i[2], &i[1]]) + 1.0);
        let dag = ComputeDag::new(&[x], &[y]).expect("dag");
        assert!(!reads_only_at_output_index(&dag, 0));
    }

    #[test]
    fn a_per_channel_stage_not_reading_the_input_is_allowed() {
        let x = placeholder("x", &[2, 3, 4], DType::F32);
        let s = placeholder("s", &[3], DType::F32);
        let scale = compute("scale", &[3], |c| s.at([&c[0]]) * 0.5);
        let y = compute("y", &[2, 3, 4], |i| {
            x.at([&i[0], &i[1], &i[2]]) * scale.at([&i[1]])
        });
        let dag = ComputeDag::new(&[x, s], &[y]).expect("dag");
        assert!(reads_only_at_output_index(&dag, 0));
        // The scale has another shape: it cannot hold the output.
        assert!(!reads_only_at_output_index(&dag, 1));
    }

    #[test]
    fn shifted_broadcast_and_reduced_reads_are_refused() {
        let x = placeholder("x", &[8], DType::F32);
        let reversed = compute("y", &[8], |i| x.at([7 - &i[0]]));
        let dag = ComputeDag::new(std::slice::from_ref(&x), &[reversed]).expect("dag");
        assert!(!reads_only_at_output_index(&dag, 0));

        // Through a stage: t = x (identity), y[i] = t[7 - i].
        let t = compute("t", &[8], |i| x.at([&i[0]]));
        let y = compute("y", &[8], |i| t.at([7 - &i[0]]));
        let dag = ComputeDag::new(std::slice::from_ref(&x), &[y]).expect("dag");
        assert!(!reads_only_at_output_index(&dag, 0));

        // Softmax-like: a reduction over x, then x at its own index.
        let k = reduce_axis(8, "k");
        let total = compute("total", &[1], |_| crate::te::sum(x.at([&k]), [&k]));
        let y = compute("y", &[8], |i| x.at([&i[0]]) / total.at([0]));
        let dag = ComputeDag::new(&[x], &[y]).expect("dag");
        assert!(!reads_only_at_output_index(&dag, 0));
    }
}
