//! The tunable tasks of a model: the kernels of its fused graph (see
//! [`fusion`](super::fusion)), one task per distinct workload key, weighted
//! by how often it occurs. A kernel that is a registry operator is that
//! operator's task (the records of tuning it alone apply); any other is a
//! task of its te DAG ([`Task::from_dag`]). Identical groups in one model,
//! or in two models, are the same task and share their records.

use crate::measure::Task;
use crate::search::SuiteTask;

use super::error::GraphError;
use super::ir::Graph;
use super::kernels::kernel_dags;

/// One task of a model.
#[derive(Clone, Debug)]
pub struct ModelTask {
    /// The task, with its workload key.
    pub task: Task,
    /// How many kernels of the model run it.
    pub weight: f64,
    /// The graph nodes (fused groups) that run it, in graph order.
    pub nodes: Vec<String>,
}

/// A model's tasks, in order of first occurrence.
#[derive(Clone, Debug)]
pub struct ModelTasks {
    /// The model's name.
    pub name: String,
    /// The tasks.
    pub tasks: Vec<ModelTask>,
}

impl ModelTasks {
    /// The tasks as the task scheduler takes them, labelled `T<i>-<family>`.
    pub fn suite_tasks(&self) -> Vec<SuiteTask> {
        self.tasks
            .iter()
            .enumerate()
            .map(|(i, t)| SuiteTask {
                label: format!("T{i}-{}", t.task.family()),
                task: t.task.clone(),
                weight: t.weight,
            })
            .collect()
    }

    /// The tasks measured with every input as an input: the copies a
    /// schedule makes of the weights are timed.
    pub fn without_constants(mut self) -> ModelTasks {
        for t in &mut self.tasks {
            t.task = t.task.clone().without_constants();
        }
        self
    }

    /// How many kernels the tasks cover.
    pub fn kernels(&self) -> f64 {
        self.tasks.iter().map(|t| t.weight).sum()
    }
}

/// The tasks of `graph` (the graph that compiles: after the passes), as
/// the model called `name`: one per distinct kernel of the fused graph
/// ([`kernel_dags`]), each with the inputs that are the model's constants
/// as its [`constants`](Task::constants): measured with the weights laid
/// out ahead of time, as the deployed model runs
/// ([`without_constants`](ModelTasks::without_constants) for the tasks with
/// every input measured as an input, what `tessera tune m.onnx
/// --no-prepack` measures).
///
/// Errors: a node that does not lower, or a kernel that cannot be a task
/// (its DAG does not survive serialisation: [`Task::from_dag`]).
pub fn model_tasks(graph: &Graph, name: &str) -> Result<ModelTasks, GraphError> {
    let tasks = kernel_dags(graph)?
        .into_iter()
        .map(|kernel| {
            let task = kernel
                .task()
                .and_then(|task| task.with_constants(&kernel.constant_inputs))
                .map_err(|e| GraphError::Kernel {
                    node: kernel.nodes.first().cloned().unwrap_or_default(),
                    op_type: kernel.dag.label().to_string(),
                    reason: format!("its kernel cannot be a tuning task: {e}"),
                })?;
            Ok(ModelTask {
                task,
                weight: kernel.nodes.len() as f64,
                nodes: kernel.nodes,
            })
        })
        .collect::<Result<Vec<_>, GraphError>>()?;
    Ok(ModelTasks {
        name: name.to_string(),
        tasks,
    })
}
