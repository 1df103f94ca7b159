//! The loop-nest IR: lowering from schedules, simplification, interpretation.

pub mod simplify;
