//! A measurement task: the workload every candidate of a batch computes,
//! where it comes from (a registry operator at a shape, or any te DAG), and
//! the inputs it is measured on.

use serde::{Deserialize, Serialize};

use crate::ops;
use crate::te::{ComputeDag, DagSpec, HostTensor, WorkloadKey};

use super::error::MeasureError;
use super::protocol::setup_round_trip;

/// Where a task's DAG comes from: what a worker process needs to build the
/// same DAG again (it then checks the key, see [`Task`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum TaskSource {
    /// A registered operator (see `tessera ops`) at a shape.
    Registry {
        /// The registry name.
        op: String,
        /// The full shape, every parameter named (`M=64,N=64,K=64`).
        shape: String,
    },
    /// Any DAG built with the te API (e.g. a fused group of a model), as data.
    Dag {
        /// The DAG with its names and label.
        spec: DagSpec,
    },
}

/// A workload to measure: a registered operator at a concrete shape
/// ([`Task::from_registry`]) or any te DAG ([`Task::from_dag`]).
///
/// Worker processes rebuild the DAG from the task's [`TaskSource`] and
/// check that it has the same [`WorkloadKey`], so a candidate can never be
/// measured on a different workload than the one it was made for.
///
/// A task may name inputs that are constant weights
/// ([`with_constants`](Self::with_constants)): each candidate is then
/// measured as a deployed inference kernel runs, with the copies it makes of
/// them laid out once before timing (see
/// [`build_with_constants`](super::build_with_constants)).
#[derive(Clone)]
pub struct Task {
    source: TaskSource,
    dag: ComputeDag,
    key: WorkloadKey,
    constants: Vec<String>,
}

impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = f.debug_struct("Task");
        match self.registry_op() {
            Some((op, shape)) => s.field("op", &op).field("shape", &shape),
            None => s.field("dag", &self.family()),
        };
        if !self.constants.is_empty() {
            s.field("constants", &self.constants);
        }
        s.field("key", &self.key.to_string()).finish()
    }
}

impl Task {
    /// The task of operator `op` (see `tessera ops`) at `shape` (`K=V,…`;
    /// parameters left out take their defaults).
    pub fn from_registry(op: &str, shape: &str) -> Result<Task, MeasureError> {
        let spec = ops::find(op)?;
        let params = spec.parse_shape(shape)?;
        let dag = spec.build(&params)?;
        let key = dag.workload_key();
        Ok(Task {
            source: TaskSource::Registry {
                op: spec.name.to_string(),
                shape: params.to_text(),
            },
            dag,
            key,
            constants: Vec::new(),
        })
    }

    /// The task of any DAG: it travels to the workers as its
    /// [`DagSpec`](crate::te::DagSpec), so schedules refer to its stages and
    /// loops by the names it was built with. Its records are stored with no
    /// registry op or shape (`op: None, shape: None`); name the workload
    /// with [`ComputeDag::with_label`] (`fused_dense_gelu[M=64,N=64,K=64]`):
    /// the label is its readable key, and the text before the first `[` its
    /// [`family`](Self::family).
    ///
    /// Fails only for a DAG its spec does not rebuild exactly: two axes of
    /// one stage with the same name, or an expression nested deeper than
    /// its JSON form can be read back (about 120 levels; serde_json's
    /// recursion limit), which no worker could then be sent.
    pub fn from_dag(dag: ComputeDag) -> Result<Task, MeasureError> {
        // Through the JSON text of a setup request, as a worker receives it.
        let source = setup_round_trip(TaskSource::Dag {
            spec: dag.to_spec(),
        })
        .map_err(|e| {
            MeasureError::Spec(format!(
                "{}: its JSON form does not read back ({e}); split deeply nested expressions into stages",
                dag.workload_key()
            ))
        })?;
        Task::from_source(source).and_then(|task| {
            if task.key == dag.workload_key() && task.dag.to_string() == dag.to_string() {
                Ok(task)
            } else {
                Err(MeasureError::Spec(format!(
                    "the DAG of {} does not rebuild from its spec with the same key and names",
                    dag.workload_key()
                )))
            }
        })
    }

    /// The task `source` describes (what a worker does on setup).
    pub fn from_source(source: TaskSource) -> Result<Task, MeasureError> {
        match source {
            TaskSource::Registry { op, shape } => Task::from_registry(&op, &shape),
            TaskSource::Dag { spec } => {
                let dag = ComputeDag::from_spec(&spec)
                    .map_err(|e| MeasureError::Spec(format!("{}: {e}", spec.label)))?;
                let key = dag.workload_key();
                Ok(Task {
                    source: TaskSource::Dag { spec },
                    dag,
                    key,
                    constants: Vec::new(),
                })
            }
        }
    }

    /// The task with the inputs named in `names` taken as constant weights
    /// (sorted, repeats dropped; none for the plain task). The workload and
    /// its key stay the same: only how candidates are measured changes.
    ///
    /// Errors: a name that is not an input, listing the inputs.
    pub fn with_constants(mut self, names: &[impl AsRef<str>]) -> Result<Task, MeasureError> {
        let inputs: Vec<&str> = self.dag.inputs().iter().map(|t| t.name()).collect();
        let mut constants = Vec::with_capacity(names.len());
        for name in names {
            let name = name.as_ref();
            if !inputs.contains(&name) {
                return Err(MeasureError::Options(format!(
                    "'{name}' is not an input of {}; its inputs are {}",
                    self.key.readable,
                    inputs.join(", ")
                )));
            }
            constants.push(name.to_string());
        }
        constants.sort_unstable();
        constants.dedup();
        self.constants = constants;
        Ok(self)
    }

    /// The task with no input taken as a constant weight: every input
    /// measured as an input.
    pub fn without_constants(mut self) -> Task {
        self.constants.clear();
        self
    }

    /// The inputs taken as constant weights (see [`with_constants`](Self::with_constants)).
    pub fn constants(&self) -> &[String] {
        &self.constants
    }

    /// What a worker set up for this task can measure: the workload key
    /// and the constants.
    pub(crate) fn setup_identity(&self) -> String {
        if self.constants.is_empty() {
            self.key.hash.clone()
        } else {
            format!("{}+{}", self.key.hash, self.constants.join(","))
        }
    }

    /// Where the DAG comes from.
    pub fn source(&self) -> &TaskSource {
        &self.source
    }

    /// The registry operator and full shape (`M=64,N=64,K=64`), for a task
    /// made by [`from_registry`](Self::from_registry); `None` for a DAG task.
    pub fn registry_op(&self) -> Option<(&str, &str)> {
        match &self.source {
            TaskSource::Registry { op, shape } => Some((op, shape)),
            TaskSource::Dag { .. } => None,
        }
    }

    /// A short name that groups similar tasks (the task scheduler's similar
    /// tasks, reports): the registry op's name, or for a DAG task its label
    /// up to the first `[` (`fused_dense_gelu` for
    /// `fused_dense_gelu[M=64,N=64,K=64]`), `dag` if that is empty.
    pub fn family(&self) -> &str {
        match &self.source {
            TaskSource::Registry { op, .. } => op,
            TaskSource::Dag { .. } => {
                let label = self.dag.label();
                let family = label.split('[').next().unwrap_or_default().trim();
                if family.is_empty() { "dag" } else { family }
            }
        }
    }

    /// The workload's DAG.
    pub fn dag(&self) -> &ComputeDag {
        &self.dag
    }

    /// The workload key.
    pub fn key(&self) -> &WorkloadKey {
        &self.key
    }

    /// The inputs candidates are measured and verified on: deterministic
    /// pseudo-random values, the same in every process.
    pub fn inputs(&self) -> Vec<HostTensor> {
        self.dag
            .inputs()
            .iter()
            .enumerate()
            .map(|(n, t)| {
                let dims: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
                HostTensor::random(&dims, t.dtype(), n as u64 + 1)
            })
            .collect()
    }

    /// Output shapes and dtypes, in argument order.
    pub(crate) fn output_layouts(&self) -> Vec<(Vec<usize>, crate::te::DType)> {
        self.dag
            .outputs()
            .iter()
            .map(|t| {
                let dims = t.shape().iter().map(|&d| d as usize).collect();
                (dims, t.dtype())
            })
            .collect()
    }

    /// The mean reduction length of an output element (FLOPs per output
    /// element), which scales the rounding tolerance of verification.
    pub(crate) fn reduction_length(&self) -> f64 {
        let elements: i64 = self.dag.outputs().iter().map(|t| t.num_elements()).sum();
        self.dag.flop_count() as f64 / elements.max(1) as f64
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::te::{self, ComputeOp, DType, IterKind, Tensor, Var};

    /// `relu(A·B + bias)` as a matmul stage and an elementwise stage: not a
    /// registry operator.
    pub(crate) fn dense_relu_dag(m: i64, n: i64, k: i64) -> ComputeDag {
        let a = te::placeholder("A", &[m, k], DType::F32);
        let b = te::placeholder("B", &[k, n], DType::F32);
        let bias = te::placeholder("bias", &[n], DType::F32);
        let r = te::reduce_axis(k, "k");
        let mm = te::compute("mm", &[m, n], |ix| {
            te::sum(a.at([&ix[0], &r]) * b.at([&r, &ix[1]]), [&r])
        });
        let out = te::compute("out", &[m, n], |ix| {
            te::max(mm.at([&ix[0], &ix[1]]) + bias.at([&ix[1]]), 0.0_f32)
        });
        ComputeDag::new(&[a, b, bias], &[out])
            .expect("valid")
            .with_label(format!("fused_dense_relu[M={m},N={n},K={k}]"))
    }

    #[test]
    fn a_dag_task_keeps_its_key_and_has_a_family_but_no_registry_op() {
        let dag = dense_relu_dag(8, 4, 6);
        let task = Task::from_dag(dag.clone()).expect("task");
        assert_eq!(task.key(), &dag.workload_key());
        assert_eq!(task.dag().to_string(), dag.to_string());
        assert_eq!(task.registry_op(), None);
        assert_eq!(task.family(), "fused_dense_relu");
        assert!(format!("{task:?}").contains("fused_dense_relu"));
        let again = Task::from_source(task.source().clone()).expect("rebuilds");
        assert_eq!(again.key(), task.key());
        let unlabelled = Task::from_dag(dense_relu_dag(8, 4, 6).with_label("")).expect("task");
        assert_eq!(unlabelled.family(), "dag");

        let registry = Task::from_registry("matmul", "M=8").expect("task");
        assert_eq!(registry.family(), "matmul");
        assert_eq!(registry.registry_op(), Some(("matmul", "M=8,N=512,K=512")));
    }

    #[test]
    fn a_dag_whose_spec_cannot_name_its_axes_apart_is_refused() {
        let x = te::placeholder("X", &[2, 3], DType::F32);
        let (i, j) = (
            Var::new("i", 2, IterKind::Spatial),
            Var::new("i", 3, IterKind::Spatial),
        );
        let body = x.at([i.expr(), j.expr()]) * 2.0_f32;
        let y = Tensor::from_compute(
            "Y",
            &[2, 3],
            ComputeOp {
                axes: vec![i, j],
                body,
            },
        );
        let dag = ComputeDag::new(&[x], &[y]).expect("a valid DAG");
        let e = Task::from_dag(dag).expect_err("ambiguous names");
        assert!(e.to_string().contains("axis name `i` is used twice"), "{e}");
    }

    /// `X + 1 + 1 + …` nested `depth` deep.
    pub(crate) fn chain(depth: usize) -> ComputeDag {
        let x = te::placeholder("X", &[4], DType::F32);
        let y = te::compute("Y", &[4], |ix| {
            (0..depth).fold(x.at([&ix[0]]), |acc, _| acc + 1.0_f32)
        });
        ComputeDag::new(&[x], &[y]).expect("valid")
    }

    #[test]
    fn deep_expressions_travel_until_json_cannot_read_them_back() {
        let deep = Task::from_dag(chain(100)).expect("100 levels travel");
        assert_eq!(deep.key(), &chain(100).workload_key());
        let e = Task::from_dag(chain(300)).expect_err("too deep for serde_json");
        assert!(e.to_string().contains("split deeply nested"), "{e}");
    }
}
