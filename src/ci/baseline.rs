//! The artifacts a run starts from (the last published ones) and how each
//! workload's new schedule compares with them.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::deploy::{Artifact, INDEX_FILE, Index, device_dir};
use crate::runtime::DeviceKey;

/// This device's artifacts in a schedules folder, as the run found them.
#[derive(Clone, Debug, Default)]
pub struct Baseline {
    /// The device folder they were read from.
    pub dir: PathBuf,
    /// The readable artifacts.
    pub artifacts: Vec<Artifact>,
    /// Index entries that could not be read, one line each.
    pub unreadable: Vec<String>,
}

impl Baseline {
    /// Reads `root`'s folder for `device`; no folder is an empty baseline.
    pub fn load(root: &Path, device: &DeviceKey) -> Baseline {
        let dir = device_dir(root, device);
        let mut baseline = Baseline {
            dir: dir.clone(),
            ..Baseline::default()
        };
        let index_path = dir.join(INDEX_FILE);
        if !index_path.is_file() {
            return baseline;
        }
        let index = match Index::read(&index_path) {
            Ok(index) => index,
            Err(e) => {
                baseline.unreadable.push(e.to_string());
                return baseline;
            }
        };
        for entry in &index.artifacts {
            match Artifact::read(&dir.join(&entry.file)) {
                Ok(a) if a.workload.key == entry.workload_key => baseline.artifacts.push(a),
                Ok(_) => baseline.unreadable.push(format!(
                    "{}: does not hold the workload its index entry names",
                    entry.file
                )),
                Err(e) => baseline.unreadable.push(e.to_string()),
            }
        }
        baseline
    }

    /// The artifact of the workload with key hash `key`, or else one of the
    /// same readable form (the operator changed since: a stale baseline).
    pub fn find(&self, key: &str, readable: &str) -> Option<(&Artifact, bool)> {
        self.artifacts
            .iter()
            .find(|a| a.workload.key == key)
            .map(|a| (a, false))
            .or_else(|| {
                self.artifacts
                    .iter()
                    .find(|a| a.workload.readable == readable)
                    .map(|a| (a, true))
            })
    }
}

/// How a workload's new schedule compares with its baseline artifact.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Comparison {
    /// The run started without an artifact for it.
    NoBaseline,
    /// The new artifact holds the baseline's schedule.
    Same,
    /// Both schedules measured by this run, one after the other.
    Measured {
        /// The baseline schedule's GFLOP/s now.
        baseline_gflops: f64,
        /// New GFLOP/s over the baseline's.
        ratio: f64,
    },
    /// The baseline no longer replays (the operator or tessera changed), so
    /// the new schedule is compared with the GFLOP/s recorded in it.
    Recorded {
        /// The GFLOP/s the baseline artifact records.
        baseline_gflops: f64,
        /// New GFLOP/s over that.
        ratio: f64,
        /// Why it could not be measured.
        why: String,
    },
    /// The baseline had an artifact; this run has none.
    Missing {
        /// The GFLOP/s the baseline artifact records.
        baseline_gflops: f64,
        /// Why there is no new artifact.
        why: String,
    },
}

impl Comparison {
    /// Slower than the baseline by more than `tolerance` (a fraction), or gone.
    pub fn regressed(&self, tolerance: f64) -> bool {
        match self {
            Comparison::NoBaseline | Comparison::Same => false,
            Comparison::Measured { ratio, .. } | Comparison::Recorded { ratio, .. } => {
                *ratio < 1.0 - tolerance
            }
            Comparison::Missing { .. } => true,
        }
    }

    /// The baseline's GFLOP/s, when there is a baseline.
    pub fn baseline_gflops(&self) -> Option<f64> {
        match self {
            Comparison::Measured {
                baseline_gflops, ..
            }
            | Comparison::Recorded {
                baseline_gflops, ..
            }
            | Comparison::Missing {
                baseline_gflops, ..
            } => Some(*baseline_gflops),
            _ => None,
        }
    }

    /// One short cell for the report: `same`, `+12%`, `−30% (recorded)`, `missing`.
    pub fn describe(&self) -> String {
        let percent = |ratio: f64| {
            let p = (ratio - 1.0) * 100.0;
            if p < 0.0 {
                format!("−{:.0}%", -p)
            } else {
                format!("+{p:.0}%")
            }
        };
        match self {
            Comparison::NoBaseline => "new".to_string(),
            Comparison::Same => "same schedule".to_string(),
            Comparison::Measured { ratio, .. } => percent(*ratio),
            Comparison::Recorded { ratio, .. } => format!("{} (vs recorded)", percent(*ratio)),
            Comparison::Missing { .. } => "missing".to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_is_a_slowdown_beyond_the_tolerance_or_a_loss() {
        let measured = |ratio| Comparison::Measured {
            baseline_gflops: 10.0,
            ratio,
        };
        assert!(!measured(0.95).regressed(0.1));
        assert!(measured(0.85).regressed(0.1));
        assert!(!measured(1.5).regressed(0.0));
        assert!(!Comparison::Same.regressed(0.0));
        assert!(!Comparison::NoBaseline.regressed(0.0));
        let missing = Comparison::Missing {
            baseline_gflops: 3.0,
            why: "no valid schedule".into(),
        };
        assert!(missing.regressed(0.5));
        assert_eq!(measured(0.7).describe(), "−30%");
        assert_eq!(measured(1.25).describe(), "+25%");
    }
}
