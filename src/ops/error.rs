//! Errors of the operator registry: unknown ops, bad shape parameters.

use thiserror::Error;

use crate::te::DagError;

/// Why an operator could not be found or instantiated.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OpError {
    /// No operator of that name is registered.
    #[error("unknown op '{name}'; `tessera ops` lists the known ones: {known}")]
    UnknownOp {
        /// The requested name.
        name: String,
        /// The registered names, comma-separated.
        known: String,
    },
    /// Two registered operators share the name.
    #[error("op '{name}' is defined more than once ({origins}); rename one of the op! definitions")]
    AmbiguousOp {
        /// The requested name.
        name: String,
        /// Where each definition comes from, `; `-separated.
        origins: String,
    },
    /// A shape parameter without default that `--shape` does not give.
    #[error(
        "{op}: shape parameter '{param}' has no default; give it, e.g. --shape {param}=64 ({op} takes {expected})"
    )]
    MissingParam {
        /// The op.
        op: String,
        /// The parameter.
        param: String,
        /// The op's parameters, comma-separated.
        expected: String,
    },
    /// A shape parameter the op does not have.
    #[error("{op}: unknown shape parameter '{param}'; {op} takes {expected}")]
    UnknownParam {
        /// The op.
        op: String,
        /// The unknown parameter.
        param: String,
        /// The op's parameters, comma-separated.
        expected: String,
    },
    /// A `--shape` entry without `=value`.
    #[error("{op}: shape parameter '{param}' has no value; write {param}=<integer>")]
    MissingValue {
        /// The op.
        op: String,
        /// The parameter.
        param: String,
    },
    /// A value that is not an integer.
    #[error("{op}: shape parameter '{param}' must be an integer, got '{value}'")]
    NotAnInteger {
        /// The op.
        op: String,
        /// The parameter.
        param: String,
        /// The text given.
        value: String,
    },
    /// A value outside the parameter's range.
    #[error("{op}: shape parameter '{param}' must be between {min} and {max}, got {value}")]
    OutOfRange {
        /// The op.
        op: String,
        /// The parameter.
        param: String,
        /// The value given.
        value: i64,
        /// Smallest allowed.
        min: i64,
        /// Largest allowed.
        max: i64,
    },
    /// A parameter given twice.
    #[error("{op}: shape parameter '{param}' is given twice")]
    DuplicateParam {
        /// The op.
        op: String,
        /// The parameter.
        param: String,
    },
    /// Parameters that are valid alone but not together.
    #[error("{op}: {reason}")]
    InvalidShape {
        /// The op.
        op: String,
        /// What is wrong and with which parameters.
        reason: String,
    },
    /// The op's tensors did not form a valid DAG (for example, too large).
    #[error("{op}: {source}")]
    Dag {
        /// The op.
        op: String,
        /// The DAG error.
        source: DagError,
    },
}
