//! Training data for the learned models: one fixed-length feature row per
//! measured candidate, its label, and the workload it belongs to.

use std::borrow::Cow;

/// Rows grouped by workload, with labels.
///
/// Labels are *normalised throughput*: the best cost of the row's workload
/// divided by the row's cost, so the best candidate of every workload is 1
/// and a candidate twice as slow is 0.5 — comparable across workloads of
/// any size. Failed candidates are labelled 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainingSet {
    /// Row-major features, `labels.len()` rows of `n_cols` each.
    pub features: Vec<f32>,
    /// Columns per row.
    pub n_cols: usize,
    /// One label per row.
    pub labels: Vec<f32>,
    /// The group (workload) of each row; rows of a group are contiguous.
    pub groups: Vec<u32>,
}

impl TrainingSet {
    /// An empty set of rows of `n_cols` features.
    pub fn new(n_cols: usize) -> TrainingSet {
        TrainingSet {
            n_cols,
            ..TrainingSet::default()
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Row `i`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.features[i * self.n_cols..(i + 1) * self.n_cols]
    }

    /// Appends a group: rows (each `n_cols` long) with their raw costs in
    /// seconds (`None` for failed candidates), labelled by normalised throughput.
    pub fn push_group(&mut self, rows: &[Vec<f32>], costs: &[Option<f64>]) {
        let best = costs
            .iter()
            .flatten()
            .copied()
            .fold(f64::INFINITY, f64::min);
        let group = self.groups.last().map_or(0, |g| g + 1);
        for (row, cost) in rows.iter().zip(costs) {
            debug_assert_eq!(row.len(), self.n_cols);
            self.features.extend_from_slice(row);
            let label = match cost {
                Some(c) if *c > 0.0 && best.is_finite() => (best / c) as f32,
                _ => 0.0,
            };
            self.labels.push(label);
            self.groups.push(group);
        }
    }

    /// Sizes of the groups, in order (what ranking objectives need).
    pub fn group_sizes(&self) -> Vec<usize> {
        let mut sizes: Vec<usize> = Vec::new();
        let mut last = None;
        for &g in &self.groups {
            if last == Some(g) {
                if let Some(n) = sizes.last_mut() {
                    *n += 1;
                }
            } else {
                sizes.push(1);
                last = Some(g);
            }
        }
        sizes
    }

    /// Rows whose indices `keep` returns true for (groups stay contiguous).
    pub fn filter(&self, keep: impl Fn(usize) -> bool) -> TrainingSet {
        let mut out = TrainingSet::new(self.n_cols);
        for i in (0..self.len()).filter(|&i| keep(i)) {
            out.features.extend_from_slice(self.row(i));
            out.labels.push(self.labels[i]);
            out.groups.push(self.groups[i]);
        }
        out
    }

    /// This set cut to at most about `max_rows` rows, deterministically, to
    /// bound a learner's fit time: each group (run of equal group ids) keeps
    /// its share of the budget in proportion to its size (at least one row);
    /// half of the share goes to the group's best-labelled rows, which the
    /// search cares about most, the other half to rows spread evenly over
    /// the rest of the group in label order, so every label range stays
    /// represented. Returns the set itself when it is small enough.
    pub(crate) fn subsample(&self, max_rows: usize) -> Cow<'_, TrainingSet> {
        let total = self.len();
        if total <= max_rows {
            return Cow::Borrowed(self);
        }
        let mut keep = vec![false; total];
        let mut start = 0;
        for size in self.group_sizes() {
            let share = (max_rows * size / total).clamp(1, size);
            let mut order: Vec<usize> = (start..start + size).collect();
            order.sort_by(|&a, &b| self.labels[b].total_cmp(&self.labels[a]).then(a.cmp(&b)));
            let best = share / 2;
            let (top, rest) = order.split_at(best);
            for &i in top {
                keep[i] = true;
            }
            let spread = share - best;
            for k in 0..spread {
                keep[rest[k * rest.len() / spread]] = true;
            }
            start += size;
        }
        Cow::Owned(self.filter(|i| keep[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::synthetic;
    use super::*;

    #[test]
    fn labels_are_normalised_throughput_per_group() {
        let mut set = TrainingSet::new(2);
        set.push_group(
            &[vec![1.0, 2.0], vec![3.0, 4.0], vec![0.0, 0.0]],
            &[Some(2.0), Some(1.0), None],
        );
        set.push_group(&[vec![5.0, 6.0]], &[Some(100.0)]);
        assert_eq!(set.labels, vec![0.5, 1.0, 0.0, 1.0]);
        assert_eq!(set.group_sizes(), vec![3, 1]);
        assert_eq!(set.row(1), &[3.0, 4.0]);
        let odd = set.filter(|i| i % 2 == 1);
        assert_eq!(odd.labels, vec![1.0, 1.0]);
        assert_eq!(odd.group_sizes(), vec![1, 1]);
    }

    #[test]
    fn subsample_keeps_best_rows_and_group_shares() {
        let set = synthetic(1000, 3, 4, 5);
        let small = set.subsample(100);
        assert!(
            small.len() <= 100 && small.len() >= 96,
            "{} rows",
            small.len()
        );
        assert_eq!(small.group_sizes(), vec![25; 4]);
        assert_eq!(
            small.labels.iter().filter(|&&l| l == 1.0).count(),
            4,
            "each group's best row"
        );
        assert!(matches!(set.subsample(1000), Cow::Borrowed(_)));
    }
}
