//! Point evaluation: the reference interpreter's exact semantics for chosen
//! output elements only. Intermediate stages are computed on demand and
//! remembered, so checking a few points of a large problem costs a few
//! reduction lengths, not the whole DAG.

use std::cell::RefCell;
use std::collections::HashMap;

use super::dag::ComputeDag;
use super::eval::{ElementSource, Fault, Node, cast, combine, const_value, eval};
use super::expr::{Const, ReduceOp};
use super::host_tensor::{HostTensor, Value};
use super::interp::{InterpError, advance, check_inputs, resolve_body};

/// One compute stage, resolved for evaluation.
struct StagePlan {
    name: String,
    body: Node,
    dtype: super::dtype::DType,
    shape: Vec<i64>,
    reduction: Option<(ReduceOp, Const, Vec<i64>)>,
}

/// Computes stage elements on demand, each at most once.
struct OnDemand<'a> {
    inputs: &'a [HostTensor],
    stages: Vec<StagePlan>,
    memo: RefCell<HashMap<(usize, usize), Value>>,
}

impl OnDemand<'_> {
    fn compute(&self, buffer: usize, flat: usize) -> Result<Value, Fault> {
        let plan = &self.stages[buffer - self.inputs.len()];
        let mut env = unflatten(flat, &plan.shape);
        let n_spatial = env.len();
        let value = match &plan.reduction {
            Some((op, identity, extents)) => {
                let mut acc = const_value(*identity);
                let mut rpoint = vec![0i64; extents.len()];
                env.extend_from_slice(&rpoint);
                loop {
                    env[n_spatial..].copy_from_slice(&rpoint);
                    acc = combine(*op, acc, eval(&plan.body, &env, self)?);
                    if !advance(&mut rpoint, extents) {
                        break;
                    }
                }
                acc
            }
            None => eval(&plan.body, &env, self)?,
        };
        // Rounded (or wrapped) to the stage's dtype, as a store would.
        Ok(cast(plan.dtype, value))
    }
}

impl ElementSource for OnDemand<'_> {
    fn element(&self, buffer: usize, flat: usize) -> Result<Value, Fault> {
        if buffer < self.inputs.len() {
            return Ok(self.inputs[buffer].get(flat));
        }
        if let Some(v) = self.memo.borrow().get(&(buffer, flat)) {
            return Ok(*v);
        }
        let v = self.compute(buffer, flat)?;
        self.memo.borrow_mut().insert((buffer, flat), v);
        Ok(v)
    }
}

/// The row-major index of element `flat` of a tensor of `shape`.
pub fn unflatten(mut flat: usize, shape: &[i64]) -> Vec<i64> {
    let mut index = vec![0i64; shape.len()];
    for d in (0..shape.len()).rev() {
        let extent = shape[d].max(1) as usize;
        index[d] = (flat % extent) as i64;
        flat /= extent;
    }
    index
}

fn plan(dag: &ComputeDag) -> Result<Vec<StagePlan>, InterpError> {
    let mut plans = Vec::new();
    for stage in dag.stages() {
        let unresolved = |what: &str| InterpError::Unresolved {
            stage: stage.name().into(),
            what: what.into(),
        };
        let op = stage
            .compute_op()
            .ok_or_else(|| unresolved("a compute rule"))?;
        let body = resolve_body(dag, stage, op)?;
        let reduction = match op.reduction() {
            Some(r) => {
                let identity =
                    r.op.identity(stage.dtype())
                        .ok_or_else(|| unresolved("a reduction identity"))?;
                let extents = r.axes.iter().map(|a| a.extent()).collect();
                Some((r.op, identity, extents))
            }
            None => None,
        };
        plans.push(StagePlan {
            name: stage.name().into(),
            body,
            dtype: stage.dtype(),
            shape: stage.shape().to_vec(),
            reduction,
        });
    }
    Ok(plans)
}

/// Evaluates the elements at `points` of output `output` (an index into
/// [`ComputeDag::outputs`]) with the reference interpreter's semantics, and
/// returns them as `f64` (booleans as 0/1).
///
/// Only what those elements depend on is computed, so this is the way to
/// check a few elements of a problem too large to interpret whole.
pub fn evaluate_points(
    dag: &ComputeDag,
    inputs: &[HostTensor],
    output: usize,
    points: &[Vec<i64>],
) -> Result<Vec<f64>, InterpError> {
    check_inputs(dag, inputs)?;
    let outputs = dag.outputs();
    let Some(tensor) = outputs.get(output) else {
        return Err(InterpError::Unresolved {
            stage: dag.label().into(),
            what: format!("output {output} (the DAG has {} outputs)", outputs.len()),
        });
    };
    let buffer = dag.output_positions()[output];
    let source = OnDemand {
        inputs,
        stages: plan(dag)?,
        memo: RefCell::new(HashMap::new()),
    };
    let mut values = Vec::with_capacity(points.len());
    for point in points {
        let flat = super::eval::flat_offset(point, tensor.shape()).ok_or_else(|| {
            InterpError::OutOfBounds {
                stage: tensor.name().into(),
                tensor: tensor.name().into(),
                index: point.clone(),
            }
        })?;
        let value = source.element(buffer, flat).map_err(|f| match f {
            Fault::DivisionByZero => InterpError::DivisionByZero {
                stage: tensor.name().into(),
            },
            Fault::OutOfBounds { buffer, index } => InterpError::OutOfBounds {
                stage: source
                    .stages
                    .get(buffer.saturating_sub(inputs.len()))
                    .map_or_else(|| tensor.name().to_string(), |s| s.name.clone()),
                tensor: dag.tensors()[buffer].name().into(),
                index,
            },
        })?;
        values.push(value.as_f64());
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::{DType, compute, placeholder, reduce_axis, select, sum};

    /// A padded 1-D convolution followed by a softmax-like normalisation:
    /// intermediates, a reduction over an intermediate, and select padding.
    fn chain() -> ComputeDag {
        let x = placeholder("X", &[3, 10], DType::F32);
        let w = placeholder("W", &[3], DType::F32);
        let pad = compute("pad", &[3, 12], |ix| {
            let (r, c) = (&ix[0], &ix[1]);
            select(c.ge(1) & c.lt(11), x.at([r.clone(), c.clone() - 1]), 0.0)
        });
        let k = reduce_axis(3, "k");
        let conv = compute("conv", &[3, 10], |ix| {
            sum(pad.at([ix[0].clone(), &ix[1] + &k]) * w.at([&k]), [&k])
        });
        let j = reduce_axis(10, "j");
        let total = compute("total", &[3], |ix| sum(conv.at([&ix[0], &j]), [&j]));
        let norm = compute("norm", &[3, 10], |ix| {
            conv.at([&ix[0], &ix[1]]) / total.at([&ix[0]])
        });
        ComputeDag::new(&[x, w], &[norm]).expect("valid")
    }

    #[test]
    fn points_match_the_whole_evaluation() {
        let dag = chain();
        let inputs = vec![
            HostTensor::random(&[3, 10], DType::F32, 1),
            HostTensor::random(&[3], DType::F32, 2),
        ];
        let whole = crate::te::evaluate(&dag, &inputs).expect("evaluates")[0].to_f64_vec();
        let points: Vec<Vec<i64>> = (0..3)
            .flat_map(|r| (0..10).map(move |c| vec![r, c]))
            .collect();
        let got = evaluate_points(&dag, &inputs, 0, &points).expect("evaluates");
        assert_eq!(got, whole);
    }

    #[test]
    fn a_point_outside_the_output_is_an_error() {
        let dag = chain();
        let inputs = vec![
            HostTensor::random(&[3, 10], DType::F32, 1),
            HostTensor::random(&[3], DType::F32, 2),
        ];
        let err = evaluate_points(&dag, &inputs, 0, &[vec![3, 0]]).expect_err("row 3");
        assert!(matches!(err, InterpError::OutOfBounds { .. }), "{err}");
        assert!(evaluate_points(&dag, &inputs, 1, &[vec![0, 0]]).is_err());
    }
}
