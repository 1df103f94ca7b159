//! Integer arithmetic shared by every pass that reasons about indices: the
//! one [`Interval`] type (value ranges, with an explicit [`Overflow`] policy)
//! and the one [`Affine`] form (`constant + Σ coefficient × atom`) of an
//! expression. A change to index analysis is one edit here.
//!
//! Placement: this module sits between te's expression leaves and everything
//! else. It imports only `crate::te`'s expression and dtype types (the
//! `te::expr` and `te::dtype` leaf modules), never a pass; te's own bound
//! checking (`te::bounds`) and every later stage (schedule, tir, codegen,
//! cost, search) import it. Modelled on TVM's `src/arith/`.

mod affine;
pub mod interval;

pub use affine::{Affine, Decompose, mentions};
pub use interval::{Interval, Overflow, decide, floor_div, gcd};
