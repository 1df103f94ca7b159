//! The job's budget and how much of it earlier runs already spent: the
//! database is the job's memory, so a second run with a larger budget
//! continues where the first stopped instead of starting again.

use std::time::Duration;

use crate::db::TuningDb;
use crate::measure::Task;

/// How much tuning a run may do; at least one of the two is set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    /// Candidates per workload, counting those measured by earlier runs
    /// (the default schedule is not a trial). The task scheduler decides
    /// which workload gets them; the total is what is fixed.
    pub trials_per_task: Option<usize>,
    /// Wall time of the tuning phase (stops after the batch in flight).
    pub time: Option<Duration>,
}

impl Budget {
    /// `64 trials per workload`, `30m`, or both.
    pub fn describe(&self) -> String {
        let trials = self
            .trials_per_task
            .map(|n| format!("{n} trials per workload"));
        let time = self
            .time
            .map(|t| format!("{} of tuning", humantime::format_duration(t)));
        match (trials, time) {
            (Some(a), Some(b)) => format!("{a}, at most {b}"),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => "none".to_string(),
        }
    }

    /// Trials this run may spend on `tasks`, given the trials each already
    /// has (`None`: no trial limit, only the time budget).
    pub fn trials_left(&self, spent: &[usize]) -> Option<usize> {
        self.trials_per_task
            .map(|n| spent.iter().map(|&s| n.saturating_sub(s)).sum())
    }
}

/// Candidates of `task` on `device` already in `db` (every record but the
/// default schedule's, failures included: they were trials too).
pub fn trials_spent(db: &TuningDb, task: &Task, device: &str) -> Result<usize, crate::db::DbError> {
    Ok(db
        .records(&task.key().hash, device)?
        .iter()
        .filter(|r| !r.steps.is_empty())
        .count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_trials_count_against_the_budget() {
        let budget = Budget {
            trials_per_task: Some(8),
            time: None,
        };
        assert_eq!(budget.trials_left(&[0, 0]), Some(16));
        assert_eq!(budget.trials_left(&[8, 3]), Some(5));
        assert_eq!(budget.trials_left(&[12, 8]), Some(0));
        let time_only = Budget {
            trials_per_task: None,
            time: Some(Duration::from_secs(60)),
        };
        assert_eq!(time_only.trials_left(&[5]), None);
        assert_eq!(time_only.describe(), "1m of tuning");
        assert_eq!(budget.describe(), "8 trials per workload");
    }
}
