//! The reference interpreter: evaluates a [`ComputeDag`] naively and exactly.
//! It is the oracle every later layer is tested against.
//!
//! Semantics:
//! - Float arithmetic inside a rule, including reduction accumulation, is done
//!   in `f64` and rounded to the stage's dtype only when the element is stored
//!   (an explicit cast to `f32` rounds immediately). An `f32` result is thus
//!   the correctly rounded value of a more exact computation, which is what
//!   compiled code is compared against, with a tolerance.
//! - Integer arithmetic wraps at the width of its dtype; integer division by
//!   zero is an error. Float → integer casts truncate toward zero and saturate.
//! - `select` evaluates only the chosen branch.
//! - Every read is bounds-checked (an error, never a panic).

use thiserror::Error;

use super::dag::ComputeDag;
use super::dtype::DType;
use super::eval::{Fault, Node, Resolver, combine, const_value, eval};
use super::host_tensor::HostTensor;
use super::tensor::{ComputeOp, Tensor};

/// Why an evaluation failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InterpError {
    /// The number of input tensors differs from the DAG's inputs.
    #[error("the DAG takes {expected} inputs, but {got} were given")]
    InputCount {
        /// Inputs the DAG declares.
        expected: usize,
        /// Inputs given.
        got: usize,
    },
    /// An input has the wrong shape.
    #[error("input '{input}' must have shape {expected:?}, but has shape {got:?}")]
    InputShape {
        /// The input.
        input: String,
        /// Declared shape.
        expected: Vec<i64>,
        /// Given shape.
        got: Vec<usize>,
    },
    /// An input has the wrong dtype.
    #[error("input '{input}' must have dtype {expected}, but has dtype {got}")]
    InputDtype {
        /// The input.
        input: String,
        /// Declared dtype.
        expected: DType,
        /// Given dtype.
        got: DType,
    },
    /// Integer division or modulo by zero.
    #[error("stage '{stage}': integer division by zero")]
    DivisionByZero {
        /// The stage.
        stage: String,
    },
    /// An expression refers to a variable or tensor outside the DAG (cannot
    /// happen for a checked DAG).
    #[error("stage '{stage}': cannot resolve {what}")]
    Unresolved {
        /// The stage.
        stage: String,
        /// What could not be resolved.
        what: String,
    },
    /// A read left its tensor (only possible with data-dependent indices).
    #[error("stage '{stage}': read of '{tensor}' at {index:?} is out of bounds")]
    OutOfBounds {
        /// The stage.
        stage: String,
        /// The tensor read.
        tensor: String,
        /// The index.
        index: Vec<i64>,
    },
}

/// Evaluates `dag` on `inputs` (in the DAG's input order) and returns its outputs.
pub fn evaluate(dag: &ComputeDag, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, InterpError> {
    let mut all = evaluate_all(dag, inputs)?;
    let mut outputs = Vec::new();
    for &p in dag.output_positions() {
        outputs.push(std::mem::replace(
            &mut all[p],
            HostTensor::zeros(&[], DType::Bool),
        ));
    }
    Ok(outputs)
}

/// Evaluates `dag` and returns every tensor, in [`ComputeDag::tensors`] order.
pub fn evaluate_all(
    dag: &ComputeDag,
    inputs: &[HostTensor],
) -> Result<Vec<HostTensor>, InterpError> {
    check_inputs(dag, inputs)?;
    let mut buffers: Vec<HostTensor> = inputs.to_vec();
    for stage in dag.stages() {
        let Some(op) = stage.compute_op() else {
            continue;
        };
        let result = evaluate_stage(dag, stage, op, &buffers)?;
        buffers.push(result);
    }
    Ok(buffers)
}

pub(crate) fn check_inputs(dag: &ComputeDag, inputs: &[HostTensor]) -> Result<(), InterpError> {
    if inputs.len() != dag.inputs().len() {
        return Err(InterpError::InputCount {
            expected: dag.inputs().len(),
            got: inputs.len(),
        });
    }
    for (declared, given) in dag.inputs().iter().zip(inputs) {
        let shape_ok = declared.ndim() == given.shape().len()
            && declared
                .shape()
                .iter()
                .zip(given.shape())
                .all(|(&d, &g)| d as usize == g);
        if !shape_ok {
            return Err(InterpError::InputShape {
                input: declared.name().into(),
                expected: declared.shape().to_vec(),
                got: given.shape().to_vec(),
            });
        }
        if declared.dtype() != given.dtype() {
            return Err(InterpError::InputDtype {
                input: declared.name().into(),
                expected: declared.dtype(),
                got: given.dtype(),
            });
        }
    }
    Ok(())
}

/// Advances `index` through the box `0..extents` in row-major order;
/// false once every point was visited.
pub(crate) fn advance(index: &mut [i64], extents: &[i64]) -> bool {
    for d in (0..index.len()).rev() {
        index[d] += 1;
        if index[d] < extents[d] {
            return true;
        }
        index[d] = 0;
    }
    false
}

/// A stage's rule resolved for evaluation: spatial axes take the first
/// environment slots, reduction axes the next; tensors are their positions
/// in [`ComputeDag::tensors`].
pub(crate) fn resolve_body(
    dag: &ComputeDag,
    stage: &Tensor,
    op: &ComputeOp,
) -> Result<Node, InterpError> {
    let reduce_axes = op.reduction().map(|r| r.axes.clone()).unwrap_or_default();
    let slots = op
        .axes
        .iter()
        .chain(&reduce_axes)
        .enumerate()
        .map(|(n, v)| (v.id(), n))
        .collect();
    let buffers = dag
        .tensors()
        .iter()
        .enumerate()
        .map(|(n, t)| (t.id(), (n, t.shape().to_vec())))
        .collect();
    let resolver = Resolver { slots, buffers };
    // The DAG check guarantees every variable and tensor resolves.
    resolver
        .resolve(&op.body)
        .map_err(|u| InterpError::Unresolved {
            stage: stage.name().into(),
            what: format!("{u:?}"),
        })
}

fn evaluate_stage(
    dag: &ComputeDag,
    stage: &Tensor,
    op: &ComputeOp,
    buffers: &[HostTensor],
) -> Result<HostTensor, InterpError> {
    let reduction = op.reduction();
    let reduce_axes = reduction.map(|r| r.axes.clone()).unwrap_or_default();
    let body = resolve_body(dag, stage, op)?;
    let reduce_extents: Vec<i64> = reduce_axes.iter().map(|a| a.extent()).collect();
    let dims: Vec<usize> = stage.shape().iter().map(|&d| d as usize).collect();
    let mut out = HostTensor::zeros(&dims, stage.dtype());
    let n_spatial = op.axes.len();
    let mut env = vec![0i64; n_spatial + reduce_extents.len()];
    let fault = |f: Fault| match f {
        Fault::DivisionByZero => InterpError::DivisionByZero {
            stage: stage.name().into(),
        },
        Fault::OutOfBounds { buffer, index } => InterpError::OutOfBounds {
            stage: stage.name().into(),
            tensor: dag.tensors()[buffer].name().into(),
            index,
        },
    };
    let identity = reduction.and_then(|r| r.op.identity(stage.dtype()));
    let mut point = vec![0i64; n_spatial];
    for flat in 0..out.len() {
        env[..n_spatial].copy_from_slice(&point);
        let value = match (reduction, identity) {
            (Some(r), Some(id)) => {
                let mut acc = const_value(id);
                let mut rpoint = vec![0i64; reduce_extents.len()];
                loop {
                    env[n_spatial..].copy_from_slice(&rpoint);
                    acc = combine(r.op, acc, eval(&body, &env, buffers).map_err(fault)?);
                    if !advance(&mut rpoint, &reduce_extents) {
                        break;
                    }
                }
                acc
            }
            _ => eval(&body, &env, buffers).map_err(fault)?,
        };
        out.set(flat, value);
        advance(&mut point, stage.shape());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::{Expr, HostData, compute, floordiv, floormod, placeholder, select};

    fn int_dag(rule: impl FnOnce(&Expr) -> Expr) -> ComputeDag {
        let a = placeholder("A", &[4], DType::I32);
        let c = compute("C", &[4], |ix| rule(&a.at([&ix[0]])));
        ComputeDag::new(&[a], &[c]).expect("valid")
    }

    fn run_i32(dag: &ComputeDag, values: Vec<i32>) -> Result<Vec<f64>, InterpError> {
        let input = HostTensor::new(&[4], HostData::I32(values)).expect("length 4");
        Ok(evaluate(dag, &[input])?[0].to_f64_vec())
    }

    #[test]
    fn floor_division_and_modulo_round_down() {
        let dag = int_dag(|x| floordiv(x, 3) * 10 + floormod(x, 3));
        let got = run_i32(&dag, vec![7, -7, 0, -1]).expect("evaluates");
        assert_eq!(got, vec![21.0, -28.0, 0.0, -8.0]);
    }

    #[test]
    fn truncating_division_by_zero_is_an_error() {
        let dag = int_dag(|x| Expr::i32(10) / x);
        let err = run_i32(&dag, vec![1, 2, 0, 4]).expect_err("divides by zero");
        assert_eq!(err, InterpError::DivisionByZero { stage: "C".into() });
        assert_eq!(run_i32(&dag, vec![-3, 2, 5, 4]).expect("ok")[0], -3.0);
    }

    #[test]
    fn i32_arithmetic_wraps() {
        let dag = int_dag(|x| x * 1_000_000);
        let got = run_i32(&dag, vec![3000, 1, 0, -1]).expect("evaluates");
        assert_eq!(got[0], (3000i32.wrapping_mul(1_000_000)) as f64);
    }

    #[test]
    fn select_evaluates_only_the_chosen_branch() {
        let dag = int_dag(|x| select(x.equal(0), 0, Expr::i32(100) / x));
        let got = run_i32(&dag, vec![0, 5, -50, 0]).expect("no division by zero");
        assert_eq!(got, vec![0.0, 20.0, -2.0, 0.0]);
    }

    #[test]
    fn inputs_are_checked() {
        let dag = int_dag(|x| x.clone());
        assert!(matches!(
            evaluate(&dag, &[]),
            Err(InterpError::InputCount {
                expected: 1,
                got: 0
            })
        ));
        let wrong_shape = HostTensor::zeros(&[5], DType::I32);
        assert!(matches!(
            evaluate(&dag, &[wrong_shape]),
            Err(InterpError::InputShape { .. })
        ));
        let wrong_dtype = HostTensor::zeros(&[4], DType::F32);
        let err = evaluate(&dag, &[wrong_dtype]).expect_err("dtype");
        assert_eq!(
            err.to_string(),
            "input 'A' must have dtype i32, but has dtype f32"
        );
    }

    #[test]
    fn f32_results_are_rounded_once_from_f64() {
        let a = placeholder("A", &[1], DType::F32);
        let c = compute("C", &[1], |ix| a.at([&ix[0]]) * 3.0 / 3.0);
        let dag = ComputeDag::new(&[a], &[c]).expect("valid");
        let x = 0.1f32;
        let input = HostTensor::from_f32(&[1], vec![x]).expect("length 1");
        let got = evaluate(&dag, &[input]).expect("evaluates");
        assert_eq!(got[0].as_f32(), Some(&[x][..]));
    }
}
