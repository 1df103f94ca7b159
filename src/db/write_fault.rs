//! Faults injected on purpose into the tuning cache's batch writes, so that
//! "a batch is stored whole or not at all" is tested deterministically: the
//! write fails, or the process aborts, right after a chosen record is
//! inserted, inside its batch's transaction.

use super::error::DbError;

/// The environment variable that makes a process crash inside a batch
/// write, for crash-atomicity tests that run the `tessera` binary as a
/// child: with `TESSERA_DB_ABORT_AFTER_ROW=k`, a database the process opens
/// aborts the process (`std::process::abort`) right after inserting the
/// `k`-th record it writes (counted from 1 over all its batches), before
/// that batch commits. Unset or empty, nothing changes; any other value
/// than a positive number is [`DbError::BadAbortAfterRow`] when the database
/// is opened.
pub const ABORT_AFTER_ROW_ENV: &str = "TESSERA_DB_ABORT_AFTER_ROW";

/// What an injected write fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteFaultAction {
    /// The write returns [`DbError::InjectedFault`]; the batch's
    /// transaction is rolled back as for any other failed write.
    Fail,
    /// The process aborts with the batch's transaction open, as a crash or
    /// a `kill -9` would leave it.
    Abort,
}

/// A fault a [`TuningDb`](super::TuningDb) injects into its batch writes
/// (see [`TuningDb::inject_write_fault`](super::TuningDb::inject_write_fault)):
/// it strikes once, right after the `after_row`-th record written since it
/// was set is inserted, before that record's batch commits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteFault {
    /// The record after which it strikes, counted from 1 over every batch
    /// written since the fault was set.
    pub after_row: usize,
    /// What it does.
    pub action: WriteFaultAction,
}

impl WriteFault {
    /// The [`WriteFaultAction::Abort`] fault [`ABORT_AFTER_ROW_ENV`] asks
    /// for, if it is set.
    pub(crate) fn from_env() -> Result<Option<WriteFault>, DbError> {
        let Some(value) = std::env::var_os(ABORT_AFTER_ROW_ENV).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let value = value.to_string_lossy().into_owned();
        match value.trim().parse::<usize>() {
            Ok(after_row) if after_row > 0 => Ok(Some(WriteFault {
                after_row,
                action: WriteFaultAction::Abort,
            })),
            _ => Err(DbError::BadAbortAfterRow { value }),
        }
    }

    /// Strikes if `row` (counted as [`after_row`](Self::after_row) is) is its row.
    pub(crate) fn strike_at(&self, row: usize, path: &std::path::Path) -> Result<(), DbError> {
        if row != self.after_row {
            return Ok(());
        }
        match self.action {
            WriteFaultAction::Fail => Err(DbError::InjectedFault {
                path: path.into(),
                row,
            }),
            WriteFaultAction::Abort => std::process::abort(),
        }
    }
}
