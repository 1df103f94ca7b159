//! The tuning cache: every measurement, keyed by (workload, device), in
//! SQLite (bundled, WAL mode, a busy timeout so concurrent tuners can share
//! a file), with JSON-lines logs as the portable exchange format.
//!
//! A record is never applied where it does not belong: [`TuningDb::lookup`]
//! answers with an exact match, or says which other devices or shapes have
//! records, and every record it returns replays on the workload's DAG.

mod error;
mod jsonl;
mod lookup;
mod record;
mod schema;
mod store;
mod write_fault;

use std::path::PathBuf;

pub use error::DbError;
pub use jsonl::{ImportStats, parse_line};
pub use lookup::{Lookup, SkippedRecord, ValidRecords};
pub use record::{DeviceInfo, RebuildError, Remeasurement, TuningRecord, WorkloadInfo};
pub use schema::{SCHEMA_VERSION, schema_sql};
pub use store::{TuningDb, WorkloadSummary};
pub use write_fault::{ABORT_AFTER_ROW_ENV, WriteFault, WriteFaultAction};

/// The default database: `TESSERA_DB` if set, else `tuning_logs/tuning.db`
/// (relative to the working directory).
pub fn default_path() -> PathBuf {
    std::env::var_os("TESSERA_DB")
        .filter(|p| !p.is_empty())
        .map_or_else(|| PathBuf::from("tuning_logs/tuning.db"), PathBuf::from)
}
