//! Typed identities of variables and tensors, so that a map keyed by one
//! cannot be looked up with the other.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// One counter for both kinds: every identity is unique in the process.
fn next() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// The process-unique identity of a [`Var`](super::Var).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VarId(u64);

/// The process-unique identity of a [`Tensor`](super::Tensor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TensorId(u64);

impl VarId {
    pub(crate) fn fresh() -> VarId {
        VarId(next())
    }
}

impl TensorId {
    pub(crate) fn fresh() -> TensorId {
        TensorId(next())
    }
}

impl fmt::Display for VarId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl fmt::Display for TensorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t{}", self.0)
    }
}
