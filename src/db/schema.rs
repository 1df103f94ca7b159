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

use rusqlite::{Connection, TransactionBehavior};

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 1;

/// Migration `n` takes a database from version `n` to `n + 1`.
const MIGRATIONS: [&str; 1] = [r#"
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
"#];

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
