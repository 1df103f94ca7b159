//! JSON-lines logs — one [`TuningRecord`] per line, the portable exchange
//! format — and merging another database. A log whose name ends in `.gz`
//! is gzip-compressed (the committed sample logs are: records repeat their
//! workload and device, so they shrink about 25×).

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::error::DbError;
use super::record::TuningRecord;
use super::schema::SCHEMA_VERSION;
use super::store::TuningDb;

/// What an import or merge did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportStats {
    /// Records read.
    pub read: usize,
    /// Records that were new.
    pub added: usize,
    /// Lines skipped as malformed (with `skip_bad`): line number and why.
    pub skipped: Vec<(usize, String)>,
}

/// Parses one line of a log.
pub fn parse_line(line: &str) -> Result<TuningRecord, String> {
    let record: TuningRecord = serde_json::from_str(line).map_err(|e| e.to_string())?;
    record.validate()?;
    Ok(record)
}

impl TuningDb {
    fn resolve(
        &self,
        selector: Option<&str>,
        what: &str,
    ) -> Result<Option<HashSet<String>>, DbError> {
        let Some(selector) = selector else {
            return Ok(None);
        };
        let keys = if what == "device" {
            self.find_devices(selector)?
        } else {
            self.find_workloads(selector)?
        };
        if keys.is_empty() {
            return Err(DbError::Selector(format!(
                "no {what} in {} matches '{selector}' (give a readable name, name#hash or a hash prefix of 6+ digits; `tessera cache list` shows what is stored)",
                self.path().display()
            )));
        }
        Ok(Some(keys.into_iter().collect()))
    }

    /// Writes the records (of the devices and workloads the selectors name,
    /// if given) to `out` as JSON lines, oldest first; returns how many. The
    /// file appears whole or not at all.
    pub fn export_jsonl(
        &self,
        out: &Path,
        device: Option<&str>,
        workload: Option<&str>,
    ) -> Result<usize, DbError> {
        let devices = self.resolve(device, "device")?;
        let workloads = self.resolve(workload, "workload")?;
        let records: Vec<TuningRecord> = self
            .all_records()?
            .into_iter()
            .filter(|r| devices.as_ref().is_none_or(|d| d.contains(&r.device.key)))
            .filter(|r| {
                workloads
                    .as_ref()
                    .is_none_or(|w| w.contains(&r.workload.key))
            })
            .collect();
        let mut text = String::new();
        for record in &records {
            let line = serde_json::to_string(record).map_err(|e| DbError::Io {
                path: out.into(),
                source: std::io::Error::other(e),
            })?;
            text.push_str(&line);
            text.push('\n');
        }
        let bytes = if is_gzip(out) {
            gzip(text.as_bytes()).map_err(|source| DbError::Io {
                path: out.into(),
                source,
            })?
        } else {
            text.into_bytes()
        };
        write_atomically(out, &bytes)?;
        Ok(records.len())
    }

    /// Imports a JSON-lines log in one transaction. Importing a record that
    /// is already stored adds nothing. Malformed lines fail the whole import
    /// (nothing is written) unless `skip_bad`, which imports the rest and
    /// reports them.
    pub fn import_jsonl(&mut self, path: &Path, skip_bad: bool) -> Result<ImportStats, DbError> {
        let text = read_log(path).map_err(|source| DbError::Io {
            path: path.into(),
            source,
        })?;
        let mut records = Vec::new();
        let mut errors = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match parse_line(line) {
                Ok(r) => records.push(r),
                Err(why) => errors.push((n + 1, why)),
            }
        }
        if !errors.is_empty() && !skip_bad {
            return Err(DbError::MalformedLog {
                path: path.into(),
                errors,
            });
        }
        let added = self.insert_all(&records)?;
        Ok(ImportStats {
            read: records.len(),
            added,
            skipped: errors,
        })
    }

    /// Copies every record of the database at `other` into this one (one
    /// transaction; records already here are not duplicated). `other` is
    /// only read.
    pub fn merge(&mut self, other: &Path) -> Result<ImportStats, DbError> {
        let sql = |source| DbError::Sqlite {
            path: other.into(),
            source,
        };
        if !other.exists() {
            return Err(DbError::Io {
                path: other.into(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such database"),
            });
        }
        let conn =
            Connection::open_with_flags(other, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(sql)?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        if version > SCHEMA_VERSION {
            return Err(DbError::NewerSchema {
                path: other.into(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version < 1 {
            return Ok(ImportStats::default());
        }
        let records = TuningDb::from_connection(conn, other.into(), version).all_records()?;
        let added = self.insert_all(&records)?;
        Ok(ImportStats {
            read: records.len(),
            added,
            skipped: Vec::new(),
        })
    }
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`.
fn is_gzip(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes)?;
    encoder.finish()
}

/// The text of a log, decompressed when its name ends in `.gz`.
fn read_log(path: &Path) -> std::io::Result<String> {
    if !is_gzip(path) {
        return std::fs::read_to_string(path);
    }
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(std::fs::File::open(path)?),
        &mut text,
    )?;
    Ok(text)
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), DbError> {
    let io = |source| DbError::Io {
        path: path.into(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let name = path
        .file_name()
        .map_or("log".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(e));
    }
    Ok(())
}
