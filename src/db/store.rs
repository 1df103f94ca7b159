//! The SQLite tuning cache: opening (WAL, busy timeout, migrations),
//! writing batches of records, and reading them back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, Row, Transaction, TransactionBehavior, params};

use crate::measure::{MeasureErrorKind, MeasureResult, Task, TaskSource};
use crate::runtime::DeviceDescription;
use crate::schedule::Step;
use crate::te::DagSpec;

use super::error::DbError;
use super::record::{DeviceInfo, Remeasurement, TuningRecord, WorkloadInfo};
use super::schema::{SCHEMA_VERSION, Version, migrate};
use super::write_fault::WriteFault;

/// How long a writer waits for another writer's transaction.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `step` again while it fails with "database is locked", for up to
/// [`BUSY_TIMEOUT`]. SQLite returns that at once, without waiting in the
/// busy handler, where waiting could deadlock: two processes opening a new
/// file together, one switching it to WAL while the other migrates it.
/// Both steps are idempotent, so the one that lost simply tries again.
fn until_not_busy<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let start = std::time::Instant::now();
    loop {
        match step() {
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && start.elapsed() < BUSY_TIMEOUT =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// A tuning database (see the [module docs](super)).
pub struct TuningDb {
    conn: Connection,
    path: PathBuf,
    /// The injected write fault, if any (a test hook).
    write_fault: Option<WriteFault>,
    /// Records written (or tried) since the write fault was set.
    rows_written: usize,
    /// The schema version of the open file (older than [`SCHEMA_VERSION`]
    /// only for a file read by [`merge`](TuningDb::merge), which lacks the
    /// columns added since).
    version: i64,
}

/// The columns [`TuningDb::row_to_record`] reads, in order
/// ([`TuningDb::record_columns`] gives the ones of the open file).
const RECORD_COLUMNS: &str = "r.id, r.steps, r.costs, r.error_kind, r.error_msg, r.build_secs, \
     r.run_secs, r.max_rel_error, r.tessera_version, r.schema_version, r.timestamp, \
     w.key, w.readable, w.op, w.shape, w.flops, w.canonical, d.key, d.readable, d.description, \
     r.remeasured_costs, r.remeasured_at, w.dag";

/// [`RECORD_COLUMNS`] of a version-2 file: no workload DAGs.
const RECORD_COLUMNS_V2: &str = "r.id, r.steps, r.costs, r.error_kind, r.error_msg, r.build_secs, \
     r.run_secs, r.max_rel_error, r.tessera_version, r.schema_version, r.timestamp, \
     w.key, w.readable, w.op, w.shape, w.flops, w.canonical, d.key, d.readable, d.description, \
     r.remeasured_costs, r.remeasured_at, NULL";

/// [`RECORD_COLUMNS`] of a version-1 file: no re-measurements.
const RECORD_COLUMNS_V1: &str = "r.id, r.steps, r.costs, r.error_kind, r.error_msg, r.build_secs, \
     r.run_secs, r.max_rel_error, r.tessera_version, r.schema_version, r.timestamp, \
     w.key, w.readable, w.op, w.shape, w.flops, w.canonical, d.key, d.readable, d.description, \
     NULL, NULL, NULL";

/// The order of "best first" among successful records: re-measured records
/// by their re-measured median, then the others by their tuning figure.
/// A re-measured median is an honest figure; the tuning figure of the best
/// of many candidates is flattered by luck, so re-measured records come first.
pub(crate) const BEST_FIRST: &str = "(r.remeasured_cost IS NULL), r.remeasured_cost, r.cost, r.id";

/// The joins every record query uses.
pub(crate) const RECORD_FROM: &str =
    "records r JOIN workloads w ON r.workload_id = w.id JOIN devices d ON r.device_id = d.id";

/// A row of [`TuningDb::list`]: one workload on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSummary {
    /// The device's readable name and key hash.
    pub device: (String, String),
    /// The workload's readable form and key hash.
    pub workload: (String, String),
    /// Records stored.
    pub records: usize,
    /// Of which measured successfully.
    pub successes: usize,
    /// The best median cost in seconds, if any succeeded.
    pub best_cost: Option<f64>,
    /// The workload's FLOPs.
    pub flops: u64,
}

impl WorkloadSummary {
    /// GFLOP/s of the best record.
    pub fn best_gflops(&self) -> Option<f64> {
        self.best_cost.map(|c| self.flops as f64 / c / 1e9)
    }
}

impl TuningDb {
    /// Opens (creating it and its folder if need be) the database at `path`
    /// and brings its schema up to date; refuses a newer schema.
    pub fn open(path: &Path) -> Result<TuningDb, DbError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| DbError::Io {
                path: parent.into(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(|source| DbError::Sqlite {
            path: path.into(),
            source,
        })?;
        Self::setup(conn, path.into())
    }

    /// Opens the database at `path`, which must exist (for commands that
    /// only read: a typo in `--db` is an error, not a new empty database).
    pub fn open_existing(path: &Path) -> Result<TuningDb, DbError> {
        if !path.is_file() {
            return Err(DbError::Io {
                path: path.into(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no tuning database here (`tessera measure` creates one; choose another with --db or TESSERA_DB)",
                ),
            });
        }
        Self::open(path)
    }

    /// A private in-memory database (for tests and dry runs).
    pub fn open_in_memory() -> Result<TuningDb, DbError> {
        let conn = Connection::open_in_memory().map_err(|source| DbError::Sqlite {
            path: ":memory:".into(),
            source,
        })?;
        Self::setup(conn, ":memory:".into())
    }

    fn setup(mut conn: Connection, path: PathBuf) -> Result<TuningDb, DbError> {
        let sql = |source| DbError::Sqlite {
            path: path.clone(),
            source,
        };
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        // Refuse a newer schema before changing anything in the file.
        let found: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        if found > SCHEMA_VERSION {
            return Err(DbError::NewerSchema {
                path,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        // WAL lets readers and one writer proceed at once; in-memory
        // databases answer "memory" and keep their journal.
        let _mode: String =
            until_not_busy(|| conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)))
                .map_err(sql)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(sql)?;
        match until_not_busy(|| migrate(&mut conn)).map_err(sql)? {
            Version::Current => Ok(TuningDb {
                conn,
                path,
                write_fault: WriteFault::from_env()?,
                rows_written: 0,
                version: SCHEMA_VERSION,
            }),
            Version::Newer(found) => Err(DbError::NewerSchema {
                path,
                found,
                supported: SCHEMA_VERSION,
            }),
        }
    }

    /// Wraps an open connection of schema `version` without migrating it
    /// (for reading another database).
    pub(crate) fn from_connection(conn: Connection, path: PathBuf, version: i64) -> TuningDb {
        TuningDb {
            conn,
            path,
            write_fault: None,
            rows_written: 0,
            version,
        }
    }

    /// The columns [`row_to_record`](Self::row_to_record) reads, as this file has them.
    pub(crate) fn record_columns(&self) -> &'static str {
        match self.version {
            ..=1 => RECORD_COLUMNS_V1,
            2 => RECORD_COLUMNS_V2,
            _ => RECORD_COLUMNS,
        }
    }

    /// Test hook: makes a later batch write fail (or the process abort)
    /// right after a chosen record is inserted, before its batch commits, so
    /// that tests can check that a batch is stored whole or not at all.
    /// Replaces any fault set before (or asked for by
    /// [`ABORT_AFTER_ROW_ENV`](super::ABORT_AFTER_ROW_ENV)); `None` removes it.
    pub fn inject_write_fault(&mut self, fault: Option<WriteFault>) {
        self.write_fault = fault;
        self.rows_written = 0;
    }

    /// Writes a consistent copy of the whole database to `to` (one file,
    /// no WAL), replacing it whole or not at all; `to`'s folder must exist.
    pub fn snapshot(&self, to: &Path) -> Result<(), DbError> {
        let name = to
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let partial = to.with_file_name(format!(".{name}.partial-{}", std::process::id()));
        let _ = std::fs::remove_file(&partial);
        let target = partial.to_string_lossy().into_owned();
        self.conn
            .execute("VACUUM INTO ?1", params![target])
            .map_err(|e| self.sql_error(e))?;
        std::fs::rename(&partial, to).map_err(|source| {
            let _ = std::fs::remove_file(&partial);
            DbError::Io {
                path: to.into(),
                source,
            }
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn sql_error(&self, source: rusqlite::Error) -> DbError {
        DbError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    pub(crate) fn conn(&self) -> &Connection {
        &self.conn
    }

    /// Stores one measured batch in one transaction: either every record of
    /// the batch is stored or none is. Returns how many were new.
    pub fn record_batch(
        &mut self,
        task: &Task,
        device: &DeviceDescription,
        batch: &[(&[Step], &MeasureResult)],
    ) -> Result<usize, DbError> {
        let key = device.key();
        let workload = WorkloadInfo {
            key: task.key().hash.clone(),
            readable: task.key().readable.clone(),
            op: task.registry_op().map(|(op, _)| op.to_string()),
            shape: task.registry_op().map(|(_, shape)| shape.to_string()),
            flops: task.dag().flop_count(),
            canonical: task.dag().canonical_text(),
            dag: match task.source() {
                TaskSource::Dag { spec } => Some(spec.clone()),
                TaskSource::Registry { .. } => None,
            },
        };
        let device = DeviceInfo {
            key: key.hash,
            readable: key.readable,
            description: device.clone(),
        };
        let records: Vec<TuningRecord> = batch
            .iter()
            .map(|(steps, result)| TuningRecord {
                schema: SCHEMA_VERSION,
                tessera_version: env!("CARGO_PKG_VERSION").to_string(),
                workload: workload.clone(),
                device: device.clone(),
                steps: steps.to_vec(),
                result: (*result).clone(),
                remeasured: None,
            })
            .collect();
        self.insert_all(&records)
    }

    /// Stores `records` in one transaction, skipping ones already stored
    /// (same fingerprint); returns how many were new.
    pub fn insert_all(&mut self, records: &[TuningRecord]) -> Result<usize, DbError> {
        let (fault, first_row) = (self.write_fault, self.rows_written);
        self.rows_written += records.len();
        let path = self.path.clone();
        self.write(|tx| {
            let mut added = 0;
            for (n, record) in records.iter().enumerate() {
                added += insert(tx, record).map_err(|source| DbError::Sqlite {
                    path: path.clone(),
                    source,
                })?;
                if let Some(fault) = &fault {
                    fault.strike_at(first_row + n + 1, &path)?;
                }
            }
            Ok(added)
        })
    }

    /// Stores the re-measurement of `steps` (a schedule of `task` measured
    /// on `device`) with every successful record of those steps there,
    /// replacing an older re-measurement. Returns how many records it was
    /// stored with (0: no such record, e.g. it was measured without a database).
    pub fn record_remeasurement(
        &mut self,
        task: &Task,
        device: &DeviceDescription,
        steps: &[Step],
        remeasurement: &Remeasurement,
    ) -> Result<usize, DbError> {
        let steps = serde_json::to_string(steps).unwrap_or_else(|_| "[]".into());
        let costs = serde_json::to_string(&remeasurement.costs).unwrap_or_else(|_| "[]".into());
        let (workload, device) = (task.key().hash.clone(), device.key().hash);
        let path = self.path.clone();
        self.write(|tx| {
            tx.execute(
                "UPDATE records SET remeasured_costs = ?1, remeasured_cost = ?2, remeasured_at = ?3 \
                 WHERE workload_id = (SELECT id FROM workloads WHERE key = ?4) \
                 AND device_id = (SELECT id FROM devices WHERE key = ?5) \
                 AND steps = ?6 AND cost IS NOT NULL",
                params![
                    costs,
                    remeasurement.median(),
                    remeasurement.timestamp,
                    workload,
                    device,
                    steps
                ],
            )
            .map_err(|source| DbError::Sqlite { path, source })
        })
    }

    /// Runs `work` in one write transaction (taken at once, so concurrent
    /// writers queue on the busy timeout instead of failing on upgrade);
    /// when `work` fails, the transaction is rolled back.
    fn write<T>(
        &mut self,
        work: impl FnOnce(&Transaction) -> Result<T, DbError>,
    ) -> Result<T, DbError> {
        let path = self.path.clone();
        let sql = |source| DbError::Sqlite { path, source };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql.clone())?;
        let value = work(&tx)?;
        tx.commit().map_err(sql)?;
        Ok(value)
    }

    /// The `k` best successful records of `workload` on `device` (key
    /// hashes), best first: the re-measured ones by their re-measured
    /// median, then the others by their tuning figure.
    pub fn best(
        &self,
        workload: &str,
        device: &str,
        k: usize,
    ) -> Result<Vec<TuningRecord>, DbError> {
        self.query(
            &format!(
                "SELECT {} FROM {RECORD_FROM} WHERE w.key = ?1 AND d.key = ?2 \
                 AND r.cost IS NOT NULL ORDER BY {BEST_FIRST} LIMIT ?3",
                self.record_columns()
            ),
            params![workload, device, k as i64],
        )
    }

    /// Every record of `workload` on `device`, failures included, oldest first
    /// (what a cost model trains on).
    pub fn records(&self, workload: &str, device: &str) -> Result<Vec<TuningRecord>, DbError> {
        self.query(
            &format!(
                "SELECT {} FROM {RECORD_FROM} WHERE w.key = ?1 AND d.key = ?2 ORDER BY r.id",
                self.record_columns()
            ),
            params![workload, device],
        )
    }

    /// Every record, oldest first.
    pub fn all_records(&self) -> Result<Vec<TuningRecord>, DbError> {
        self.query(
            &format!(
                "SELECT {} FROM {RECORD_FROM} ORDER BY r.id",
                self.record_columns()
            ),
            [],
        )
    }

    /// How many records are stored.
    pub fn count(&self) -> Result<usize, DbError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM records", [], |r| r.get::<_, i64>(0))
            .map(|n| n as usize)
            .map_err(|e| self.sql_error(e))
    }

    pub(crate) fn query(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<TuningRecord>, DbError> {
        self.query_rows(sql, params)?.into_iter().collect()
    }

    /// As [`query`](Self::query), but a row that cannot be read is its own
    /// error and the others are still returned.
    pub(crate) fn query_rows(
        &self,
        sql: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<Result<TuningRecord, DbError>>, DbError> {
        let mut stmt = self.conn.prepare(sql).map_err(|e| self.sql_error(e))?;
        let rows = stmt
            .query_map(params, |row| Ok(self.row_to_record(row)))
            .map_err(|e| self.sql_error(e))?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.map_err(|e| self.sql_error(e))?);
        }
        Ok(out)
    }

    /// Reads a row of [`RECORD_COLUMNS`].
    fn row_to_record(&self, row: &Row) -> Result<TuningRecord, DbError> {
        let id: i64 = row.get(0).map_err(|e| self.sql_error(e))?;
        let bad = |reason: String| DbError::BadRow {
            path: self.path.clone(),
            id,
            reason,
        };
        let get_err = |e: rusqlite::Error| bad(e.to_string());
        let text = |i: usize| row.get::<_, String>(i).map_err(get_err);
        let steps: Vec<Step> = serde_json::from_str(&text(1)?)
            .map_err(|e| bad(format!("its steps do not parse: {e}")))?;
        let costs: Vec<f64> = serde_json::from_str(&text(2)?)
            .map_err(|e| bad(format!("its costs do not parse: {e}")))?;
        let kind = text(3)?;
        let error_kind = MeasureErrorKind::from_name(&kind)
            .ok_or_else(|| bad(format!("unknown error kind '{kind}'")))?;
        let description: DeviceDescription = serde_json::from_str(&text(19)?)
            .map_err(|e| bad(format!("its device description does not parse: {e}")))?;
        let flops: i64 = row.get(15).map_err(get_err)?;
        let remeasured = match row.get::<_, Option<String>>(20).map_err(get_err)? {
            None => None,
            Some(json) => Some(Remeasurement {
                costs: serde_json::from_str(&json)
                    .map_err(|e| bad(format!("its re-measured costs do not parse: {e}")))?,
                timestamp: row
                    .get::<_, Option<f64>>(21)
                    .map_err(get_err)?
                    .unwrap_or_default(),
            }),
        };
        Ok(TuningRecord {
            schema: row.get(9).map_err(get_err)?,
            tessera_version: text(8)?,
            workload: WorkloadInfo {
                key: text(11)?,
                readable: text(12)?,
                op: row.get(13).map_err(get_err)?,
                shape: row.get(14).map_err(get_err)?,
                flops: flops.max(0) as u64,
                canonical: text(16)?,
                dag: match row.get::<_, Option<String>>(22).map_err(get_err)? {
                    None => None,
                    Some(json) => Some(
                        DagSpec::from_json(&json)
                            .map_err(|e| bad(format!("its workload's DAG does not parse: {e}")))?,
                    ),
                },
            },
            device: DeviceInfo {
                key: text(17)?,
                readable: text(18)?,
                description,
            },
            steps,
            result: MeasureResult {
                costs,
                error_kind,
                error_msg: text(4)?,
                build_secs: row.get(5).map_err(get_err)?,
                run_secs: row.get(6).map_err(get_err)?,
                max_rel_error: row.get(7).map_err(get_err)?,
                timestamp: row.get(10).map_err(get_err)?,
            },
            remeasured,
        })
    }

    /// Workloads per device: record counts and the best cost.
    pub fn list(&self) -> Result<Vec<WorkloadSummary>, DbError> {
        let mut stmt = self
            .conn
            .prepare(
                "SELECT d.readable, d.key, w.readable, w.key, COUNT(*), \
                 SUM(r.cost IS NOT NULL), MIN(r.cost), w.flops \
                 FROM records r JOIN workloads w ON r.workload_id = w.id \
                 JOIN devices d ON r.device_id = d.id \
                 GROUP BY r.device_id, r.workload_id ORDER BY d.readable, d.key, w.readable, w.key",
            )
            .map_err(|e| self.sql_error(e))?;
        let rows = stmt
            .query_map([], |r| {
                Ok(WorkloadSummary {
                    device: (r.get(0)?, r.get(1)?),
                    workload: (r.get(2)?, r.get(3)?),
                    records: r.get::<_, i64>(4)? as usize,
                    successes: r.get::<_, i64>(5)? as usize,
                    best_cost: r.get(6)?,
                    flops: r.get::<_, i64>(7)?.max(0) as u64,
                })
            })
            .map_err(|e| self.sql_error(e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(e))
    }

    /// Keeps the `keep` best successful records of each workload on each
    /// device (best as [`best`](Self::best) orders them, so a re-measured
    /// record outlives a lucky one) and deletes every other record; returns
    /// how many were deleted.
    pub fn prune(&mut self, keep: usize) -> Result<usize, DbError> {
        let path = self.path.clone();
        self.write(|tx| {
            tx.execute(
                &format!(
                    "DELETE FROM records WHERE id NOT IN (\
                       SELECT id FROM (SELECT r.id, ROW_NUMBER() OVER (\
                         PARTITION BY r.workload_id, r.device_id ORDER BY {BEST_FIRST}) AS rank \
                       FROM records r WHERE r.cost IS NOT NULL) WHERE rank <= ?1)"
                ),
                params![keep as i64],
            )
            .map_err(|source| DbError::Sqlite { path, source })
        })
    }

    /// The device key hashes whose key or readable name `selector` names
    /// (a full readable name, `readable#short-hash`, or a hash prefix of at
    /// least 6 digits).
    pub fn find_devices(&self, selector: &str) -> Result<Vec<String>, DbError> {
        self.find_keys("devices", selector)
    }

    /// The workload key hashes `selector` names (as for devices).
    pub fn find_workloads(&self, selector: &str) -> Result<Vec<String>, DbError> {
        self.find_keys("workloads", selector)
    }

    fn find_keys(&self, table: &str, selector: &str) -> Result<Vec<String>, DbError> {
        let (readable, hash) = match selector.split_once('#') {
            Some((r, h)) => (Some(r), h),
            None => (Some(selector), selector),
        };
        let hash_prefix = (hash.len() >= 6 && hash.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| format!("{}%", hash.to_ascii_lowercase()));
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT key FROM {table} WHERE (?1 IS NOT NULL AND key LIKE ?1) \
                 OR (readable = ?2 AND (?3 = 0 OR ?1 IS NULL OR key LIKE ?1)) ORDER BY key"
            ))
            .map_err(|e| self.sql_error(e))?;
        let with_hash = i64::from(selector.contains('#'));
        let rows = stmt
            .query_map(params![hash_prefix, readable, with_hash], |r| r.get(0))
            .map_err(|e| self.sql_error(e))?;
        rows.collect::<Result<_, _>>()
            .map_err(|e| self.sql_error(e))
    }
}

/// Inserts one record (and its workload and device if new); 1 if it was new.
fn insert(tx: &Transaction, record: &TuningRecord) -> rusqlite::Result<usize> {
    let w = &record.workload;
    tx.prepare_cached(
        "INSERT INTO workloads (key, readable, op, shape, canonical, flops, dag) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) \
         ON CONFLICT(key) DO UPDATE SET dag = excluded.dag WHERE dag IS NULL",
    )?
    .execute(params![
        w.key,
        w.readable,
        w.op,
        w.shape,
        w.canonical,
        w.flops as i64,
        w.dag.as_ref().map(DagSpec::to_json)
    ])?;
    let d = &record.device;
    let description = serde_json::to_string(&d.description).unwrap_or_default();
    tx.prepare_cached(
        "INSERT INTO devices (key, readable, description) VALUES (?1, ?2, ?3) ON CONFLICT(key) DO NOTHING",
    )?
    .execute(params![d.key, d.readable, description])?;
    let r = &record.result;
    let steps = serde_json::to_string(&record.steps).unwrap_or_else(|_| "[]".into());
    let costs = serde_json::to_string(&r.costs).unwrap_or_else(|_| "[]".into());
    let again = record.remeasured.as_ref();
    let again_costs =
        again.map(|a| serde_json::to_string(&a.costs).unwrap_or_else(|_| "[]".into()));
    let (again_cost, again_at) = (
        again.and_then(Remeasurement::median),
        again.map(|a| a.timestamp),
    );
    let fingerprint = record.fingerprint();
    let added = tx
        .prepare_cached(
            "INSERT INTO records (workload_id, device_id, steps, costs, cost, error_kind, error_msg, \
             build_secs, run_secs, max_rel_error, tessera_version, schema_version, timestamp, fingerprint, \
             remeasured_costs, remeasured_cost, remeasured_at) \
             VALUES ((SELECT id FROM workloads WHERE key = ?1), (SELECT id FROM devices WHERE key = ?2), \
             ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17) \
             ON CONFLICT(fingerprint) DO NOTHING",
        )?
        .execute(params![
            w.key,
            d.key,
            steps,
            costs,
            r.median(),
            r.error_kind.name(),
            r.error_msg,
            r.build_secs,
            r.run_secs,
            r.max_rel_error,
            record.tessera_version,
            record.schema,
            r.timestamp,
            fingerprint,
            again_costs,
            again_cost,
            again_at,
        ])?;
    // A record already stored still takes a newer re-measurement.
    if added == 0 && again.is_some() {
        tx.prepare_cached(
            "UPDATE records SET remeasured_costs = ?1, remeasured_cost = ?2, remeasured_at = ?3 \
             WHERE fingerprint = ?4 AND (remeasured_at IS NULL OR remeasured_at < ?3)",
        )?
        .execute(params![again_costs, again_cost, again_at, fingerprint])?;
    }
    Ok(added)
}
