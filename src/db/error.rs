//! Errors of the tuning cache.

use std::path::PathBuf;

use thiserror::Error;

/// What went wrong with a tuning database or log.
#[derive(Debug, Error)]
pub enum DbError {
    /// SQLite failed.
    #[error("tuning database {path}: {source}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's error.
        source: rusqlite::Error,
    },
    /// The database was written by a newer tessera.
    #[error(
        "tuning database {path} has schema version {found}, but this tessera reads versions up to {supported}; \
         upgrade tessera, or use another database with --db or TESSERA_DB"
    )]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The newest this build understands.
        supported: i64,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Lines of a JSON-lines log that are not valid records (nothing was imported).
    #[error("{path}: {} malformed line(s), nothing imported (use --skip-bad to import the rest): {}", .errors.len(), summarize(.errors))]
    MalformedLog {
        /// The log file.
        path: PathBuf,
        /// Line number (from 1) and what is wrong with it.
        errors: Vec<(usize, String)>,
    },
    /// A stored record that cannot be read back (corrupt or foreign data).
    #[error("tuning database {path}: record {id}: {reason}")]
    BadRow {
        /// The database file.
        path: PathBuf,
        /// The record's row id.
        id: i64,
        /// What is wrong.
        reason: String,
    },
    /// A device or workload selector that matches nothing or too much.
    #[error("{0}")]
    Selector(String),
    /// A write failed on purpose (a test hook:
    /// [`TuningDb::inject_write_fault`](super::TuningDb::inject_write_fault)).
    #[error(
        "tuning database {path}: write fault injected after record {row}; its batch was rolled back"
    )]
    InjectedFault {
        /// The database file.
        path: PathBuf,
        /// The record after which it struck (counted from 1).
        row: usize,
    },
    /// `TESSERA_DB_ABORT_AFTER_ROW` holds something other than a positive number.
    #[error(
        "TESSERA_DB_ABORT_AFTER_ROW={value} is not a positive record count (a test hook); unset it"
    )]
    BadAbortAfterRow {
        /// The value found.
        value: String,
    },
}

fn summarize(errors: &[(usize, String)]) -> String {
    const SHOWN: usize = 5;
    let mut parts: Vec<String> = errors
        .iter()
        .take(SHOWN)
        .map(|(line, why)| format!("line {line}: {why}"))
        .collect();
    if errors.len() > SHOWN {
        parts.push(format!("and {} more", errors.len() - SHOWN));
    }
    parts.join("; ")
}
