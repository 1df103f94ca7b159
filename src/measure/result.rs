//! What a measurement produces: [`MeasureResult`] and its error kinds, the
//! record the tuning cache stores.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// How a measurement ended. Only [`MeasureErrorKind::None`] carries costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MeasureErrorKind {
    /// Built, ran, verified and timed.
    None,
    /// The steps do not replay on the workload's DAG.
    InstantiationError,
    /// Lowering or code generation failed (or the builder died).
    CompileError,
    /// Building took longer than the build timeout.
    BuildTimeout,
    /// The kernel crashed its worker (a signal, an abort) or could not run.
    RuntimeError,
    /// Running took longer than the run timeout.
    RunTimeout,
    /// The kernel's output differs from the trusted result.
    WrongResult,
    /// The measurement machinery itself failed (a worker that could not start).
    UnknownError,
}

impl MeasureErrorKind {
    /// The snake-case name used in logs and the database.
    pub fn name(self) -> &'static str {
        match self {
            MeasureErrorKind::None => "none",
            MeasureErrorKind::InstantiationError => "instantiation_error",
            MeasureErrorKind::CompileError => "compile_error",
            MeasureErrorKind::BuildTimeout => "build_timeout",
            MeasureErrorKind::RuntimeError => "runtime_error",
            MeasureErrorKind::RunTimeout => "run_timeout",
            MeasureErrorKind::WrongResult => "wrong_result",
            MeasureErrorKind::UnknownError => "unknown_error",
        }
    }

    /// Every kind, in declaration order.
    pub const ALL: [MeasureErrorKind; 8] = [
        MeasureErrorKind::None,
        MeasureErrorKind::InstantiationError,
        MeasureErrorKind::CompileError,
        MeasureErrorKind::BuildTimeout,
        MeasureErrorKind::RuntimeError,
        MeasureErrorKind::RunTimeout,
        MeasureErrorKind::WrongResult,
        MeasureErrorKind::UnknownError,
    ];

    /// The kind named `name` (see [`name`](Self::name)).
    pub fn from_name(name: &str) -> Option<MeasureErrorKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

impl std::fmt::Display for MeasureErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The outcome of measuring one candidate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasureResult {
    /// Seconds per run, one entry per timing repeat; empty unless
    /// `error_kind` is [`MeasureErrorKind::None`].
    pub costs: Vec<f64>,
    /// How the measurement ended.
    pub error_kind: MeasureErrorKind,
    /// What went wrong, for people; empty on success.
    pub error_msg: String,
    /// Seconds spent building (replay, lowering, code generation).
    pub build_secs: f64,
    /// Seconds spent running: verification run, warm-up and timed repeats.
    pub run_secs: f64,
    /// Largest relative difference from the trusted result, when it was compared.
    pub max_rel_error: Option<f64>,
    /// When the measurement finished, in seconds since the Unix epoch.
    pub timestamp: f64,
}

impl MeasureResult {
    /// A failed measurement.
    pub fn error(kind: MeasureErrorKind, msg: impl Into<String>, build_secs: f64) -> Self {
        MeasureResult {
            costs: Vec::new(),
            error_kind: kind,
            error_msg: msg.into(),
            build_secs,
            run_secs: 0.0,
            max_rel_error: None,
            timestamp: now(),
        }
    }

    /// True when the candidate was measured and verified.
    pub fn is_ok(&self) -> bool {
        self.error_kind == MeasureErrorKind::None
    }

    /// The median of the costs (seconds per run), if measured.
    pub fn median(&self) -> Option<f64> {
        (self.is_ok() && !self.costs.is_empty()).then(|| super::timing::median(&self.costs))
    }

    /// The smallest cost (seconds per run), if measured.
    pub fn min(&self) -> Option<f64> {
        self.costs
            .iter()
            .copied()
            .min_by(f64::total_cmp)
            .filter(|_| self.is_ok())
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in MeasureErrorKind::ALL {
            assert_eq!(MeasureErrorKind::from_name(kind.name()), Some(kind));
            let json = serde_json::to_string(&kind).expect("serialises");
            assert_eq!(json, format!("\"{}\"", kind.name()));
        }
        assert_eq!(MeasureErrorKind::from_name("fast"), None);
    }

    #[test]
    fn median_and_min_only_for_successes() {
        let mut r = MeasureResult::error(MeasureErrorKind::WrongResult, "differs", 0.1);
        r.costs = vec![3.0, 1.0, 2.0, 10.0, 4.0];
        assert_eq!(r.median(), None);
        r.error_kind = MeasureErrorKind::None;
        assert_eq!(r.median(), Some(3.0), "the middle cost, not the mean (4)");
        assert_eq!(r.min(), Some(1.0));
        r.costs.clear();
        assert_eq!((r.median(), r.min()), (None, None));
    }
}
