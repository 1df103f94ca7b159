//! The auto-scheduler: sketches (structure), annotation (numbers), an
//! evolutionary search guided by a cost model, and the tuning loop that
//! measures, records and learns.

pub mod annotate;
pub mod evolution;
pub mod factor;
mod infer;
pub mod sketch;
pub mod tuner;

pub use annotate::{Decisions, MaterializeError, materialize, random_decisions};
pub use evolution::{Candidate, SearchOptions, SearchPolicy, steps_key};
pub use infer::infer_candidate;
pub use sketch::{AnnotationSite, Sketch, SketchStep, generate_sketches};
pub use tuner::{CurvePoint, TaskTuner, TuneError, TuneOptions, TuneReport, tune};
