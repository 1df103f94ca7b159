//! The CI job that produces tuned artifacts (`tessera ci`): one run per
//! target machine (or per shard of a suite on machines of one class) tunes
//! the suite under a budget, resuming from its database, and writes into
//! one folder everything deployment and the next run need:
//!
//! ```text
//! OUT/tuning.db                      the database (cache it between runs)
//! OUT/tuning_logs/<device>.jsonl     this device's records, portable
//! OUT/schedules/<device>/            the deployed artifacts + index.json
//! OUT/cost_model/<device>.model      a cost model retrained on the records
//! OUT/report.md, report.json         the table, the budget, regressions
//! OUT/curves.svg                     tuning curves of this run
//! OUT/schedules/<device>/models/<m>/ with --onnx: the model artifact
//! OUT/model_report.json              with --onnx: latency before/after
//! ```
//!
//! Before publishing, the job compares every workload with the artifact it
//! started from (the baseline): both schedules are measured one after the
//! other, and one slower by more than the tolerance is a regression.

mod baseline;
mod budget;
mod compare;
mod error;
mod job;
mod model;
mod publish;
mod report;
mod shard;
mod tuning;

pub use baseline::{Baseline, Comparison};
pub use budget::{Budget, trials_spent};
pub use error::CiError;
pub use job::{
    CiOptions, CiOutputs, CiReport, CiTasks, CiWorkload, DB_FILE, LOGS_DIR, MODEL_DIR,
    SCHEDULES_DIR, Stage, run_ci,
};
pub use model::{MODEL_REPORT_JSON, ModelCiReport, finish_model, model_latency, model_suite};
pub use report::{CURVES_SVG, REPORT_JSON, REPORT_MD, markdown, write_report};
pub use shard::{Shard, ShardParseError};
