//! Errors of code generation and of calling compiled kernels.

use thiserror::Error;

use crate::te::DType;

/// A function that could not be compiled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodegenError {
    /// The host ISA could not be set up.
    #[error("cannot target this host: {0}")]
    Host(String),
    /// Cranelift rejected the generated code (a bug in the translator).
    #[error("cranelift: {0}")]
    Cranelift(String),
    /// The loop IR uses something the translator cannot express.
    #[error("unsupported in code generation: {0}")]
    Unsupported(String),
}

/// A kernel called with arguments that do not match its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KernelError {
    /// Wrong number of arguments.
    #[error("kernel '{kernel}' takes {expected} buffers, got {got}")]
    ArgumentCount {
        /// The kernel.
        kernel: String,
        /// Parameters.
        expected: usize,
        /// Arguments given.
        got: usize,
    },
    /// An argument of the wrong shape or dtype.
    #[error(
        "kernel '{kernel}': argument {index} ('{param}') must be {expected_dtype}{expected:?}, got {got_dtype}{got:?}"
    )]
    ArgumentMismatch {
        /// The kernel.
        kernel: String,
        /// Position of the argument.
        index: usize,
        /// The parameter's name.
        param: String,
        /// Declared shape.
        expected: Vec<usize>,
        /// Declared dtype.
        expected_dtype: DType,
        /// Given shape.
        got: Vec<usize>,
        /// Given dtype.
        got_dtype: DType,
    },
    /// A host buffer could not be allocated.
    #[error(transparent)]
    Buffer(#[from] crate::runtime::BufferError),
}
