//! The auto-scheduler: sketches (structure), annotation (numbers), an
//! evolutionary search guided by a cost model, and the tuning loop that
//! measures, records and learns; the re-measurement of the best candidates
//! at the end of a run; the task scheduler that shares one budget among the
//! workloads of a suite, and tuning-curve plots (with the `cli` feature).

pub mod annotate;
pub mod evolution;
pub mod factor;
mod infer;
#[cfg(feature = "cli")]
pub mod plot;
pub mod remeasure;
pub mod scheduler;
pub mod sketch;
pub mod suite;
pub mod tuner;

pub use annotate::{Decisions, MaterializeError, materialize, random_decisions};
pub use evolution::{Candidate, SearchOptions, SearchPolicy, steps_key};
pub use infer::infer_candidate;
#[cfg(feature = "cli")]
pub use plot::{PlotError, plot_curves, plot_latency_curve, plot_normalised_curves};
pub use remeasure::{MAX_REMEASURE, RemeasureOptions, RemeasureReport, RemeasuredCandidate};
pub use scheduler::{
    LatencyPoint, SchedulerParams, SuiteOptions, SuiteReport, SuiteTaskReport, TaskHistory,
    tune_suite, weighted_latency,
};
pub use sketch::{
    AnnotationSite, Sketch, SketchStep, TileRole, generate_sketches, generate_sketches_for,
};
pub use suite::{Suite, SuiteError, SuiteTask, SuiteWorkload};
pub use tuner::{
    CurvePoint, Progress, TaskTuner, TuneError, TuneEvent, TuneOptions, TuneReport, remeasure_best,
    tune,
};
