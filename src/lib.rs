//! tessera: a tensor compiler and auto-scheduler for CPUs.
//!
//! Operators are written as tensor expressions ([`te`]); the operator library
//! ([`ops`]) holds the built-in ones; [`cli`] is the `tessera` command line.

pub mod arith;
pub mod ci;
pub mod cli;
pub mod codegen;
pub mod cost;
pub mod db;
pub mod deploy;
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
