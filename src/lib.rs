//! tessera: a tensor compiler and auto-scheduler for CPUs.
//!
//! Operators are written as tensor expressions ([`te`]); the operator library
//! ([`ops`]) holds the built-in ones; [`bench`] times a tuned schedule
//! against its contenders; `cli` is the `tessera` command line (the default
//! `cli` feature: without it, no clap, progress bars, plots or GEMM peers).

pub mod arith;
pub mod bench;
pub mod ci;
#[cfg(feature = "cli")]
pub mod cli;
pub mod codegen;
pub mod cost;
pub mod db;
pub mod deploy;
pub mod graph;
pub mod measure;
pub mod ops;
pub mod runtime;
pub mod schedule;
pub mod search;
pub mod te;
pub mod tir;

/// Defines an operator close to the math (`tessera::op! { pub fn … }`); see
/// the `tessera-macros` crate docs for the grammar and the expansion.
pub use tessera_macros::op;

/// The link-time registry behind [`ops::registry`]: `op!` expands to
/// `tessera::inventory::submit!`, so a user crate needs no dependency of its own.
#[doc(hidden)]
pub use inventory;
