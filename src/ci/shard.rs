//! `--shard i/n`: the i-th of n shares of a suite, so that n machines of one
//! device class split the work (the CI system's job matrix runs the shards;
//! `tessera cache merge` and `tessera deploy` combine them).

use std::fmt;
use std::str::FromStr;

/// One share of a suite: workloads `index-1, index-1+count, …` in suite
/// order (round robin, so every shard gets a mix of the suite's families).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 1-based.
    pub index: usize,
    /// How many shards the suite is split into.
    pub count: usize,
}

impl Shard {
    /// The whole suite.
    pub const ALL: Shard = Shard { index: 1, count: 1 };

    /// Whether the workload at `position` (0-based, in suite order) is this shard's.
    pub fn contains(&self, position: usize) -> bool {
        position % self.count == self.index - 1
    }

    /// The items of `all` (in suite order) that are this shard's.
    pub fn select<T: Clone>(&self, all: &[T]) -> Vec<T> {
        all.iter()
            .enumerate()
            .filter(|(n, _)| self.contains(*n))
            .map(|(_, t)| t.clone())
            .collect()
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Why a `--shard` value is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--shard '{0}': expected i/n with 1 ≤ i ≤ n, e.g. 2/4")]
pub struct ShardParseError(pub String);

impl FromStr for Shard {
    type Err = ShardParseError;

    fn from_str(text: &str) -> Result<Shard, ShardParseError> {
        let bad = || ShardParseError(text.to_string());
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_partition_the_suite() {
        let items: Vec<usize> = (0..7).collect();
        let mut seen: Vec<usize> = Vec::new();
        for index in 1..=3 {
            let shard = Shard { index, count: 3 };
            seen.extend(shard.select(&items));
        }
        seen.sort_unstable();
        assert_eq!(seen, items);
        assert_eq!(Shard { index: 2, count: 3 }.select(&items), vec![1, 4]);
        assert_eq!(Shard::ALL.select(&items), items);
    }

    #[test]
    fn parsing_checks_the_range() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "1/0", "2", "a/b", "1/2/3", ""] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert_eq!(Shard { index: 1, count: 2 }.to_string(), "1/2");
    }
}
