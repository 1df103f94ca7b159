//! A per-thread memo of e-graph runs.
//!
//! The tuner lowers thousands of candidates whose index expressions repeat
//! with fresh loop variables. A run depends only on the converted term (with
//! variables and leaves numbered by first use), the variables' extents and
//! what is known about each leaf, so that is the key; the value is the
//! extracted term, which the caller maps back to its own variables. A hit
//! returns exactly what a fresh run would, so results stay deterministic.

use std::cell::RefCell;
use std::collections::HashMap;

use egg::RecExpr;

use super::analysis::LeafInfo;
use super::interval::Range;
use super::language::IndexLang;

/// Entries kept per thread before the memo is emptied.
const CAPACITY: usize = 4096;

/// What an e-graph run depends on.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct Key {
    nodes: Vec<IndexLang>,
    extents: Vec<i64>,
    /// Per leaf: (is boolean, range, may fault, node count).
    leaves: Vec<(bool, Range, bool, usize)>,
}

impl Key {
    /// The key of a run on `expr` with these variable extents and leaves.
    pub fn new(
        expr: &RecExpr<IndexLang>,
        extents: Vec<i64>,
        leaves: &[LeafInfo],
        leaf_sizes: &[usize],
    ) -> Key {
        Key {
            nodes: expr.as_ref().to_vec(),
            extents,
            leaves: leaves
                .iter()
                .zip(leaf_sizes)
                .map(|(l, &size)| {
                    (
                        l.ty == super::analysis::Ty::Bool,
                        l.range,
                        l.may_fault,
                        size,
                    )
                })
                .collect(),
        }
    }
}

thread_local! {
    static MEMO: RefCell<HashMap<Key, Option<RecExpr<IndexLang>>>> =
        RefCell::new(HashMap::new());
}

/// The remembered result for `key`, or `run()`'s, remembered.
pub(super) fn remember(
    key: Key,
    run: impl FnOnce() -> Option<RecExpr<IndexLang>>,
) -> Option<RecExpr<IndexLang>> {
    if let Some(hit) = MEMO.with(|m| m.borrow().get(&key).cloned()) {
        return hit;
    }
    let result = run();
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= CAPACITY {
            m.clear();
        }
        m.insert(key, result.clone());
    });
    result
}

/// Forgets every remembered run of this thread (to time cold runs).
#[cfg(test)]
pub(super) fn clear() {
    MEMO.with(|m| m.borrow_mut().clear());
}
