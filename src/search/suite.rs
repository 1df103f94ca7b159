//! Suite files: a named list of workloads (registry op + shape + weight)
//! tuned together by the task scheduler (`tessera tune --suite FILE`).
//!
//! The format is JSON, documented in `suites/README.md`:
//!
//! ```json
//! {"name": "quick", "description": "…",
//!  "workloads": [{"label": "GMM-1", "op": "batch_matmul",
//!                 "shape": "B=1,M=128,N=128,K=128", "weight": 1}]}
//! ```
//!
//! `weight` is how often the workload occurs in the end-to-end model (the
//! scheduler minimises Σ weight · latency); it defaults to 1.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::measure::Task;

/// A suite of workloads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    /// Short name (shown in reports).
    pub name: String,
    /// What the suite is for.
    #[serde(default)]
    pub description: String,
    /// The workloads, in tuning (warm-up) order.
    pub workloads: Vec<SuiteWorkload>,
}

/// One workload of a suite.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteWorkload {
    /// Unique name within the suite, e.g. `C2D-3`.
    pub label: String,
    /// The registry op (see `tessera ops`).
    pub op: String,
    /// Shape parameters `K=V,…`; the ones left out take their defaults.
    #[serde(default)]
    pub shape: String,
    /// Occurrences in the end-to-end model (> 0).
    #[serde(default = "one")]
    pub weight: f64,
}

fn one() -> f64 {
    1.0
}

/// A workload of a suite, built.
#[derive(Clone, Debug)]
pub struct SuiteTask {
    /// The workload's label.
    pub label: String,
    /// The task.
    pub task: Task,
    /// Its weight in the objective.
    pub weight: f64,
}

/// A suite file that cannot be used.
#[derive(Debug, Error)]
pub enum SuiteError {
    /// The file cannot be read.
    #[error("cannot read suite {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not JSON of the suite format.
    #[error(
        "suite {path}: {source} (expected {{\"name\": …, \"workloads\": [{{\"label\", \"op\", \"shape\", \"weight\"}}, …]}}; see suites/README.md)"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// The JSON error, with line and column.
        source: serde_json::Error,
    },
    /// A suite without workloads.
    #[error("suite {path}: \"workloads\" is empty; list at least one workload")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// One workload is wrong.
    #[error("suite {path}: workload #{number} '{label}': {reason}")]
    Workload {
        /// The file.
        path: PathBuf,
        /// 1-based position in `workloads`.
        number: usize,
        /// Its label.
        label: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
}

impl Suite {
    /// Reads and checks the suite at `path`: every workload builds, labels
    /// are unique and non-empty, weights are positive and finite.
    pub fn load(path: &Path) -> Result<Suite, SuiteError> {
        let text = std::fs::read_to_string(path).map_err(|source| SuiteError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Suite::parse(&text, path)
    }

    /// Parses and checks suite JSON; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Suite, SuiteError> {
        let suite: Suite = serde_json::from_str(text).map_err(|source| SuiteError::Parse {
            path: path.to_path_buf(),
            source,
        })?;
        suite.build(path)?;
        Ok(suite)
    }

    /// The workloads as tasks, in file order.
    pub fn tasks(&self) -> Result<Vec<SuiteTask>, SuiteError> {
        self.build(Path::new(&self.name))
    }

    fn build(&self, path: &Path) -> Result<Vec<SuiteTask>, SuiteError> {
        if self.workloads.is_empty() {
            return Err(SuiteError::Empty {
                path: path.to_path_buf(),
            });
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut tasks = Vec::with_capacity(self.workloads.len());
        for (index, w) in self.workloads.iter().enumerate() {
            let bad = |reason: String| SuiteError::Workload {
                path: path.to_path_buf(),
                number: index + 1,
                label: w.label.clone(),
                reason,
            };
            if w.label.trim().is_empty() {
                return Err(bad(
                    "the label is empty; give every workload a unique label".into(),
                ));
            }
            if let Some(first) = seen.insert(w.label.as_str(), index + 1) {
                return Err(bad(format!(
                    "duplicate label (workload #{first} has it too); labels must be unique"
                )));
            }
            if !(w.weight.is_finite() && w.weight > 0.0) {
                return Err(bad(format!(
                    "weight {} must be a positive number (how often the workload occurs in the model)",
                    w.weight
                )));
            }
            let task = Task::from_registry(&w.op, &w.shape).map_err(|e| bad(e.to_string()))?;
            tasks.push(SuiteTask {
                label: w.label.clone(),
                task,
                weight: w.weight,
            });
        }
        Ok(tasks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops;

    fn repo_suite(name: &str) -> Suite {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites")
            .join(name);
        Suite::load(&path).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_quick_suite_has_one_small_workload_per_registered_op() {
        let suite = repo_suite("quick.json");
        let tasks = suite.tasks().expect("every workload builds");
        let mut names: Vec<&str> = tasks.iter().map(|t| t.task.family()).collect();
        names.sort_unstable();
        let mut registered: Vec<&str> = ops::registry().iter().map(|op| op.name).collect();
        registered.sort_unstable();
        assert_eq!(names, registered, "each op exactly once");
        for t in &tasks {
            let flops = t.task.dag().flop_count();
            assert!(flops <= 1 << 20, "{}: {flops} FLOPs is not small", t.label);
            assert_eq!(t.weight, 1.0);
        }
    }

    #[test]
    fn the_ansor_suite_builds_every_workload_at_the_papers_shapes() {
        let suite = repo_suite("ansor.json");
        let tasks = suite.tasks().expect("every workload builds");
        assert_eq!(tasks.len(), 46, "11 families of 4 shapes, TBG with 2");
        let family = |prefix: &str| {
            tasks
                .iter()
                .filter(|t| t.label.rsplit_once('-').is_some_and(|(f, _)| f == prefix))
                .count()
        };
        for prefix in [
            "GMM",
            "C1D",
            "C2D",
            "C3D",
            "GRP",
            "DIL",
            "DEP",
            "T2D",
            "CAP",
            "NRM",
            "ConvLayer",
        ] {
            assert_eq!(family(prefix), 4, "{prefix}");
        }
        assert_eq!(family("TBG"), 2);
        let key = |label: &str| {
            let t = tasks.iter().find(|t| t.label == label).expect(label);
            t.task.key().readable.clone()
        };
        // GMM (batch, N, M, K): N rows, M columns.
        assert!(key("GMM-2").starts_with("batch_matmul[B=1,M=512,N=32,K=512,"));
        assert!(
            key("C2D-1")
                .starts_with("conv2d[N=1,C=3,H=224,W=224,K=64,R=7,S=7,stride=2,pad=3,dilation=1,")
        );
        assert!(key("DIL-3").contains("dilation=2"));
        assert!(key("GRP-4").ends_with("groups=4,f32]"));
        assert!(
            key("T2D-4")
                .starts_with("conv2d_transpose[N=1,C=64,H=32,W=32,K=3,R=4,S=4,stride=2,pad=1,")
        );
        assert!(key("TBG-2").starts_with("transpose_batch_matmul[B=16,L=128,H=16,D=64,"));
        // ResNet-18's first layer has 3 input channels: 4 groups need 4 (see suites/README.md).
        assert!(key("GRP-1").contains("C=4,"));
    }

    fn parse_err(text: &str) -> String {
        Suite::parse(text, Path::new("s.json"))
            .expect_err("rejected")
            .to_string()
    }

    #[test]
    fn bad_suites_are_rejected_naming_the_workload() {
        let entry = |w: &str| {
            format!(
                r#"{{"name": "t", "workloads": [{{"label": "a", "op": "relu", "shape": "M=4,N=4"}}, {w}]}}"#
            )
        };
        let e = parse_err(&entry(r#"{"label": "b", "op": "nope"}"#));
        assert!(
            e.contains("s.json") && e.contains("#2 'b'") && e.contains("unknown op 'nope'"),
            "{e}"
        );
        let e = parse_err(&entry(r#"{"label": "b", "op": "relu", "shape": "M=0"}"#));
        assert!(
            e.contains("#2 'b'") && e.contains("'M' must be between"),
            "{e}"
        );
        let e = parse_err(&entry(r#"{"label": "b", "op": "relu", "weight": 0}"#));
        assert!(
            e.contains("#2 'b'") && e.contains("weight 0 must be a positive"),
            "{e}"
        );
        let e = parse_err(&entry(r#"{"label": "b", "op": "relu", "weight": -2.5}"#));
        assert!(e.contains("weight -2.5"), "{e}");
        let e = parse_err(&entry(r#"{"label": "a", "op": "gelu"}"#));
        assert!(
            e.contains("#2 'a'") && e.contains("duplicate label (workload #1"),
            "{e}"
        );
        let e = parse_err(&entry(r#"{"label": " ", "op": "gelu"}"#));
        assert!(e.contains("label is empty"), "{e}");
        let e = parse_err(&entry(r#"{"label": "b", "op": "relu", "shap": "M=4"}"#));
        assert!(
            e.contains("unknown field `shap`") && e.contains("line 1"),
            "{e}"
        );
        let e = parse_err(r#"{"name": "t", "workloads": []}"#);
        assert!(e.contains("\"workloads\" is empty"), "{e}");
        let e = parse_err("[1, 2");
        assert!(e.starts_with("suite s.json:"), "{e}");
        let missing = Suite::load(Path::new("/nonexistent/suite.json")).expect_err("missing");
        assert!(
            missing
                .to_string()
                .contains("cannot read suite /nonexistent/suite.json")
        );
    }

    #[test]
    fn weight_and_shape_default() {
        let suite = Suite::parse(
            r#"{"name": "t", "workloads": [{"label": "x", "op": "relu"}, {"label": "y", "op": "gelu", "weight": 2.5}]}"#,
            Path::new("t.json"),
        )
        .expect("valid");
        let tasks = suite.tasks().expect("builds");
        assert_eq!(tasks[0].weight, 1.0);
        assert_eq!(
            tasks[0].task.registry_op().map(|(_, s)| s),
            Some("M=1024,N=1024")
        );
        assert_eq!(tasks[1].weight, 2.5);
        assert_eq!(suite.description, "");
    }
}
