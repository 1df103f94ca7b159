//! The database schema and its migrations, versioned by `PRAGMA user_version`.
//!
//! Version 1:
//! - `devices`: one row per device key, with the readable name and the
//!   description (JSON) it was made from.
//! - `workloads`: one row per workload key, with the readable form, the
//!   registry op and shape it was built from (when known), the canonical DAG
//!   text and the FLOP count.
//! - `records`: one row per measurement: steps (JSON), costs (JSON seconds),
//!   `cost` (their median, NULL unless the measurement succeeded), error
//!   kind and message, build and run seconds, tessera and schema versions,
//!   timestamp, and a `fingerprint` of the record's content that makes
//!   imports and merges idempotent. Indexed on (workload, device, cost) for
//!   best-of queries.
//!
//! Version 2 adds the re-measurement of a record's schedule at the end of a
//! tuning run to `records`: `remeasured_costs` (JSON seconds),
//! `remeasured_cost` (their median) and `remeasured_at` (Unix seconds), all
//! NULL for records that were not re-measured (every record of a version-1
//! database); indexed on (workload, device, remeasured_cost) for the
//! deploy's choice.
//!
//! Version 3 adds `dag` to `workloads`: the DAG (a `DagSpec`, JSON) of a
//! workload not built from the registry (a model's fused group), so that
//! its records can be rebuilt into a task (deploy, verify, retraining);
//! NULL for registry workloads and every workload of an older file.

use rusqlite::{Connection, TransactionBehavior};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 3;

/// Migration `n` takes a database from version `n` to `n + 1`.
const MIGRATIONS: [&str; 3] = [
    r#"
CREATE TABLE devices (
    id          INTEGER PRIMARY KEY,
    key         TEXT NOT NULL UNIQUE,
    readable    TEXT NOT NULL,
    description TEXT NOT NULL
);
CREATE TABLE workloads (
    id        INTEGER PRIMARY KEY,
    key       TEXT NOT NULL UNIQUE,
    readable  TEXT NOT NULL,
    op        TEXT,
    shape     TEXT,
    canonical TEXT NOT NULL,
    flops     INTEGER NOT NULL
);
CREATE TABLE records (
    id              INTEGER PRIMARY KEY,
    workload_id     INTEGER NOT NULL REFERENCES workloads(id),
    device_id       INTEGER NOT NULL REFERENCES devices(id),
    steps           TEXT NOT NULL,
    costs           TEXT NOT NULL,
    cost            REAL,
    error_kind      TEXT NOT NULL,
    error_msg       TEXT NOT NULL,
    build_secs      REAL NOT NULL,
    run_secs        REAL NOT NULL,
    max_rel_error   REAL,
    tessera_version TEXT NOT NULL,
    schema_version  INTEGER NOT NULL,
    timestamp       REAL NOT NULL,
    fingerprint     TEXT NOT NULL UNIQUE
);
CREATE INDEX records_best ON records(workload_id, device_id, cost);
CREATE INDEX workloads_op ON workloads(op);
"#,
    r#"
ALTER TABLE records ADD COLUMN remeasured_costs TEXT;
ALTER TABLE records ADD COLUMN remeasured_cost REAL;
ALTER TABLE records ADD COLUMN remeasured_at REAL;
CREATE INDEX records_remeasured ON records(workload_id, device_id, remeasured_cost);
"#,
    r#"
ALTER TABLE workloads ADD COLUMN dag TEXT;
"#,
];

/// The SQL that took a database from schema `version - 1` to `version`
/// (`schema_sql(1)` creates a version-1 database): what tests use to make a
/// database as an older tessera wrote it.
#[doc(hidden)]
pub fn schema_sql(version: i64) -> Option<&'static str> {
    usize::try_from(version - 1)
        .ok()
        .and_then(|n| MIGRATIONS.get(n))
        .copied()
}

/// What opening found.
pub(crate) enum Version {
    /// Up to date (after migrating, if needed).
    Current,
    /// Written by a newer tessera.
    Newer(i64),
}

fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
}

/// Brings the schema up to [`SCHEMA_VERSION`], each migration in its own
/// write transaction (so two processes opening a new file at once migrate it once).
pub(crate) fn migrate(conn: &mut Connection) -> rusqlite::Result<Version> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let version = user_version(&tx)?;
        if !(0..=SCHEMA_VERSION).contains(&version) {
            return Ok(Version::Newer(version));
        }
        if version == SCHEMA_VERSION {
            tx.commit()?;
            return Ok(Version::Current);
        }
        tx.execute_batch(MIGRATIONS[version as usize])?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
}
