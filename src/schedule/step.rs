//! Transform steps: the serialisable form of a schedule.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A loop annotation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Annotation {
    /// A plain serial loop.
    #[default]
    None,
    /// Iterations run on the thread pool.
    Parallel,
    /// The loop becomes vector code (innermost loops only).
    Vectorize,
    /// The loop is unrolled.
    Unroll,
}

impl Annotation {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Annotation::None => "none",
            Annotation::Parallel => "parallel",
            Annotation::Vectorize => "vectorize",
            Annotation::Unroll => "unroll",
        }
    }
}

/// One transform of a schedule, as Ansor records them. Stages and iterators
/// are named (`"C"`, `"i0.1"`) so that a step list reads well and applies to
/// any shape of the same operator.
///
/// JSON form: `{"kind": "split", "stage": "C", "iter": "i0", "factors": [8, 4]}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    /// Splits `iter` into `factors.len() + 1` loops: an outer loop of extent
    /// ⌈extent / ∏factors⌉, then one loop per factor (outer to inner).
    /// Factors need not divide the extent; the remainder is guarded.
    Split {
        /// The stage.
        stage: String,
        /// The iterator to split.
        iter: String,
        /// Extents of the inner loops, outer to inner (each ≥ 1).
        factors: Vec<i64>,
    },
    /// Fuses consecutive loops of the same kind into one.
    Fuse {
        /// The stage.
        stage: String,
        /// The loops, outer to inner, consecutive in the current order.
        iters: Vec<String>,
    },
    /// Reorders the loops of a stage.
    Reorder {
        /// The stage.
        stage: String,
        /// Every current loop of the stage, in the new order (outer first).
        order: Vec<String>,
    },
    /// Annotates a loop (parallel, vectorize, unroll or none).
    Annotate {
        /// The stage.
        stage: String,
        /// The loop.
        iter: String,
        /// The annotation.
        annotation: Annotation,
    },
    /// `pragma auto_unroll_max_step`: unroll inner loop nests of the stage
    /// whose total number of iterations is at most this (0 turns it off).
    Pragma {
        /// The stage.
        stage: String,
        /// The largest loop nest (in iterations) to unroll.
        auto_unroll_max_step: u32,
    },
    /// Computes `stage` inside loop `iter` of `target` (its only consumer, or
    /// a stage that consumer is computed inside), just the region that one
    /// iteration needs.
    ComputeAt {
        /// The producer.
        stage: String,
        /// The consumer whose loop hosts it.
        target: String,
        /// The loop of `target`.
        iter: String,
    },
    /// Substitutes an elementwise stage into its consumers.
    ComputeInline {
        /// The stage (no reduction, not an output).
        stage: String,
    },
    /// Computes a stage at the root again (undoes compute_at / inline).
    ComputeRoot {
        /// The stage.
        stage: String,
    },
    /// Adds a local stage `<stage>.local` that computes `stage`; `stage` then
    /// copies it out. Must come before any loop transform of `stage`. With
    /// `layout`, the local buffer's dimensions are the stage's permuted
    /// (local dimension `d` is stage dimension `layout[d]`), and the copy
    /// out transposes: e.g. a convolution's `[n, k, y, x]` accumulated as
    /// `[n, y, x, k]`, contiguous along the output channels.
    CacheWrite {
        /// The stage.
        stage: String,
        /// A permutation of the stage's dimensions (absent: the same order).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        layout: Option<Vec<usize>>,
    },
    /// Adds a local stage `<stage>.local` copying `stage`, and makes `readers`
    /// read the copy. With `layout`, the copy's dimensions are the stage's
    /// permuted (`copy` dimension `d` is `stage` dimension `layout[d]`): a
    /// transposing pack, e.g. `[1, 0]` stores a weight `W[n, k]` as `W[k, n]`.
    CacheRead {
        /// The stage (may be an input).
        stage: String,
        /// The stages that read the copy instead.
        readers: Vec<String>,
        /// A permutation of the stage's dimensions (absent: the same order).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        layout: Option<Vec<usize>>,
    },
    /// Adds a stage `<stage>.panel` holding the elements `reader` reads of
    /// `stage`, indexed by the reader's own axes: `panel[a₀, …] =
    /// stage[index(a₀, …)]`, where `index` is the reader's one read of
    /// `stage` and `axes` lists, in the panel's dimension order, every axis
    /// of the reader (spatial or reduction) that index uses. The reader then
    /// reads `panel[a₀, …]`. A strided or windowed read (a convolution's
    /// `data[c, y·s + r, x·s + q]`) becomes contiguous along the last axis
    /// (an im2col panel); computed at a loop, the panel holds one tile's.
    /// `stage` may be inlined (padding is then computed into the panel).
    ///
    /// JSON form: `{"kind": "pack_panel", "stage": "pad", "reader":
    /// "conv2d.local", "axes": ["rr", "rs", "rc", "i3"]}`.
    PackPanel {
        /// The stage read (an input, a computed or an inlined stage).
        stage: String,
        /// The one stage that reads the panel instead.
        reader: String,
        /// The reader's axes, in the panel's dimension order (outer first).
        axes: Vec<String>,
    },
    /// Factors a reduction: the reduction loop `iter` (a reduction axis or a
    /// split part of one) becomes the first spatial axis of a new stage
    /// `<stage>.rf`, which `stage` then reduces.
    Rfactor {
        /// The stage (a reduction).
        stage: String,
        /// The reduction loop to factor out.
        iter: String,
    },
    /// Replaces the block of the stage's three innermost loops, from `iter`
    /// inward (two spatial loops and one reduction loop, in any order), by
    /// one call of the GEMM micro-kernel `kernel` (`C[m×n] += A[m×kc]·B[kc×n]`,
    /// see `runtime::micro_kernels`). The block must be an f32 multiply-accumulate
    /// whose output and B operand are contiguous along the n loop; lowering
    /// checks the access pattern and says what does not match.
    Tensorize {
        /// The stage (a sum reduction).
        stage: String,
        /// The outermost loop of the block: the third loop from the inside.
        iter: String,
        /// The micro-kernel, e.g. `avx512_6x32` (`intrinsic` in JSON, the
        /// name recorded schedules and logs use).
        #[serde(rename = "intrinsic")]
        kernel: String,
    },
    /// The f32 transcendental calls (`exp`, `log`, `tanh`, `sigmoid`,
    /// `erf`) of the stage's innermost vectorised loop `iter` run through
    /// the `std::arch` row primitives of `isa` (`avx2` or `avx512`, see
    /// `runtime::row_math`): lowering fissions the loop into computing the
    /// arguments into a scratch row, one row-primitive call, and the rest
    /// of the body reading the results.
    ///
    /// JSON form: `{"kind": "row_math", "stage": "S", "iter": "i1.1", "isa": "avx2"}`.
    RowMath {
        /// The stage.
        stage: String,
        /// Its innermost loop, vectorised.
        iter: String,
        /// The instruction set of the row primitives (`avx2`, `avx512`).
        isa: String,
    },
    /// The two innermost loops of a copy stage (a `cache_read` panel),
    /// from `iter` inward, run as one call of the `std::arch` packing
    /// routine of `isa` (`generic`, `sse`, `avx2`, `avx512`; see
    /// `runtime::pack`): `dst[r, c] = src[r·rs + c·cs]` at the ISA's full
    /// width, with in-register transposes when the source is contiguous
    /// along the rows. Lowering checks the copy's indices are affine in
    /// the two loops and computes the strides.
    ///
    /// JSON form: `{"kind": "pack", "stage": "W.local", "iter": "i0", "isa": "avx2"}`.
    Pack {
        /// The copy stage.
        stage: String,
        /// The outer of its two innermost loops.
        iter: String,
        /// The instruction set of the packing routine.
        isa: String,
    },
}

/// The distinct instruction sets `isa_of` finds in `steps`, as written.
fn isas_of(steps: &[Step], isa_of: impl Fn(&Step) -> Option<&String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for isa in steps.iter().filter_map(isa_of) {
        if !out.contains(isa) {
            out.push(isa.clone());
        }
    }
    out
}

/// The instruction sets the `pack` steps of `steps` name, as written.
pub fn pack_isas_of(steps: &[Step]) -> Vec<String> {
    isas_of(steps, |s| match s {
        Step::Pack { isa, .. } => Some(isa),
        _ => None,
    })
}

/// The instruction sets the `row_math` steps of `steps` name, as written.
pub fn row_math_isas_of(steps: &[Step]) -> Vec<String> {
    isas_of(steps, |s| match s {
        Step::RowMath { isa, .. } => Some(isa),
        _ => None,
    })
}

/// Whether `steps` call a micro-kernel (have a `tensorize` step).
pub fn calls_micro_kernel(steps: &[Step]) -> bool {
    steps.iter().any(|s| matches!(s, Step::Tensorize { .. }))
}

impl Step {
    /// The stage the step applies to.
    pub fn stage(&self) -> &str {
        match self {
            Step::Split { stage, .. }
            | Step::Fuse { stage, .. }
            | Step::Reorder { stage, .. }
            | Step::Annotate { stage, .. }
            | Step::Pragma { stage, .. }
            | Step::ComputeAt { stage, .. }
            | Step::ComputeInline { stage }
            | Step::ComputeRoot { stage }
            | Step::CacheWrite { stage, .. }
            | Step::CacheRead { stage, .. }
            | Step::PackPanel { stage, .. }
            | Step::Rfactor { stage, .. }
            | Step::Tensorize { stage, .. }
            | Step::RowMath { stage, .. }
            | Step::Pack { stage, .. } => stage,
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Split {
                stage,
                iter,
                factors,
            } => write!(f, "split {stage}.{iter} by {factors:?}"),
            Step::Fuse { stage, iters } => write!(f, "fuse {stage}.[{}]", iters.join(", ")),
            Step::Reorder { stage, order } => {
                write!(f, "reorder {stage} to [{}]", order.join(", "))
            }
            Step::Annotate {
                stage,
                iter,
                annotation,
            } => write!(f, "annotate {stage}.{iter} {}", annotation.name()),
            Step::Pragma {
                stage,
                auto_unroll_max_step,
            } => write!(
                f,
                "pragma {stage} auto_unroll_max_step={auto_unroll_max_step}"
            ),
            Step::ComputeAt {
                stage,
                target,
                iter,
            } => write!(f, "compute_at {stage} -> {target}.{iter}"),
            Step::ComputeInline { stage } => write!(f, "compute_inline {stage}"),
            Step::ComputeRoot { stage } => write!(f, "compute_root {stage}"),
            Step::CacheWrite { stage, layout } => {
                write!(f, "cache_write {stage}")?;
                match layout {
                    Some(layout) => write!(f, " in layout {layout:?}"),
                    None => Ok(()),
                }
            }
            Step::CacheRead {
                stage,
                readers,
                layout,
            } => {
                write!(f, "cache_read {stage} for [{}]", readers.join(", "))?;
                match layout {
                    Some(layout) => write!(f, " in layout {layout:?}"),
                    None => Ok(()),
                }
            }
            Step::PackPanel {
                stage,
                reader,
                axes,
            } => write!(
                f,
                "pack_panel {stage} for {reader} as [{}]",
                axes.join(", ")
            ),
            Step::Rfactor { stage, iter } => write!(f, "rfactor {stage}.{iter}"),
            Step::Tensorize {
                stage,
                iter,
                kernel,
            } => write!(f, "tensorize {stage}.{iter} with {kernel}"),
            Step::RowMath { stage, iter, isa } => write!(f, "row_math {stage}.{iter} with {isa}"),
            Step::Pack { stage, iter, isa } => write!(f, "pack {stage}.{iter} with {isa}"),
        }
    }
}

/// A step file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepParseError {
    /// Not JSON at all.
    #[error("not valid JSON: {0}")]
    Json(String),
    /// JSON, but neither a list of steps nor an object with `"steps"`.
    #[error("expected a JSON array of steps or an object with a \"steps\" array")]
    Shape,
    /// One step is malformed.
    #[error("step {index}: {message}")]
    Step {
        /// Position of the step in the list (from 0).
        index: usize,
        /// What is wrong with it.
        message: String,
    },
}

/// Parses a step list from JSON: either an array of steps or an object with
/// a `"steps"` array (as in tuning records and artifacts).
pub fn steps_from_json(text: &str) -> Result<Vec<Step>, StepParseError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| StepParseError::Json(e.to_string()))?;
    let list = match &value {
        serde_json::Value::Array(items) => items,
        serde_json::Value::Object(map) => match map.get("steps") {
            Some(serde_json::Value::Array(items)) => items,
            _ => return Err(StepParseError::Shape),
        },
        _ => return Err(StepParseError::Shape),
    };
    list.iter()
        .enumerate()
        .map(|(index, item)| {
            Step::deserialize(item).map_err(|e| StepParseError::Step {
                index,
                message: e.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_form_is_tagged_by_kind() {
        let step = Step::Split {
            stage: "C".into(),
            iter: "i0".into(),
            factors: vec![8, 4],
        };
        let text = serde_json::to_string(&step).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"kind":"split","stage":"C","iter":"i0","factors":[8,4]}"#
        );
        let back = steps_from_json(&format!("[{text}]"));
        assert_eq!(back, Ok(vec![step.clone()]));
        let obj = steps_from_json(&format!("{{\"steps\": [{text}]}}"));
        assert_eq!(obj, Ok(vec![step]));
    }

    #[test]
    fn malformed_steps_are_named_by_position() {
        let text = r#"[{"kind": "compute_root", "stage": "C"}, {"kind": "split", "stage": "C"}]"#;
        let err = steps_from_json(text).expect_err("second step lacks fields");
        assert!(
            err.to_string().starts_with("step 1: missing field `iter`"),
            "{err}"
        );
        let err = steps_from_json(r#"[{"kind": "twist", "stage": "C"}]"#).expect_err("unknown");
        assert!(err.to_string().contains("unknown variant `twist`"), "{err}");
        assert_eq!(steps_from_json("{}"), Err(StepParseError::Shape));
        assert!(matches!(
            steps_from_json("[1,"),
            Err(StepParseError::Json(_))
        ));
    }
}
