//! Verification: a candidate's outputs against a trusted result for the same
//! inputs. Small tasks are trusted to the reference interpreter; for large
//! ones the default schedule's kernel is run once (in a worker), checked at
//! sampled points against the interpreter, and then trusted for the batch.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::runtime::NdBuffer;
use crate::te::{self, HostTensor};

use super::error::MeasureError;
use super::task::Task;

/// Tasks of at most this many FLOPs are verified against the interpreter
/// evaluated whole (about a second of interpretation at most).
pub const INTERPRETER_FLOP_LIMIT: u64 = 1 << 23;

/// Output elements checked against the interpreter when the trusted result
/// comes from the default schedule's kernel.
pub const SAMPLED_POINTS: usize = 64;

/// The trusted outputs of a task and the tolerance candidates must meet.
#[derive(Debug)]
pub struct Reference {
    outputs: Vec<HostTensor>,
    tolerance: f64,
}

/// How far a candidate is from the reference.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Within tolerance; the largest relative error.
    Match(f64),
    /// Outside tolerance, with a description of the worst element.
    Mismatch(f64, String),
}

/// The tolerance on the relative error of a result accumulated over
/// `reduction_length` terms: reassociation and FMA contraction change
/// rounding by about one ulp per accumulated term. The one formula that
/// measurement, `tessera bench` and the equivalence tests check against.
pub fn rounding_tolerance(reduction_length: f64) -> f64 {
    1e-5 + 2e-7 * reduction_length
}

/// The rounding tolerance for a task: [`rounding_tolerance`] of its mean
/// reduction length (FLOPs per output element).
pub fn tolerance(task: &Task) -> f64 {
    rounding_tolerance(task.reduction_length())
}

impl Reference {
    /// The interpreter's outputs for the task's inputs (small tasks).
    pub fn from_interpreter(task: &Task) -> Result<Reference, MeasureError> {
        let outputs = te::evaluate(task.dag(), &task.inputs())?;
        Ok(Reference {
            outputs,
            tolerance: tolerance(task),
        })
    }

    /// Trusts `outputs` (raw bytes of a kernel's outputs for the task's
    /// inputs) after checking [`SAMPLED_POINTS`] elements of each output
    /// (including the first and the last) against the interpreter.
    pub fn from_checked_kernel(task: &Task, bytes: &[u8]) -> Result<Reference, MeasureError> {
        let outputs =
            outputs_from_bytes(task, bytes).map_err(|reason| MeasureError::Reference {
                task: task.key().readable.clone(),
                reason,
            })?;
        let inputs = task.inputs();
        let tol = tolerance(task);
        let mut rng = StdRng::seed_from_u64(0x7e55e7a);
        for (n, output) in outputs.iter().enumerate() {
            let shape = output.shape();
            let len = output.len();
            if len == 0 {
                continue;
            }
            let mut flats = vec![0, len - 1];
            flats.extend((0..SAMPLED_POINTS.saturating_sub(2)).map(|_| rng.random_range(0..len)));
            let points: Vec<Vec<i64>> = flats.iter().map(|&f| unflatten(f, shape)).collect();
            let want = te::evaluate_points(task.dag(), &inputs, n, &points)?;
            let got = output.to_f64_vec();
            for ((&flat, point), w) in flats.iter().zip(&points).zip(want) {
                let g = got[flat];
                if relative_error(g, w) > tol {
                    return Err(MeasureError::Reference {
                        task: task.key().readable.clone(),
                        reason: format!(
                            "the default schedule's kernel gives {g} at output {n} {point:?}, \
                             the interpreter {w}: a code generation bug, please report it"
                        ),
                    });
                }
            }
        }
        Ok(Reference {
            outputs,
            tolerance: tol,
        })
    }

    /// The tolerance on the relative error.
    pub fn tolerance(&self) -> f64 {
        self.tolerance
    }

    /// Compares a candidate's raw output bytes with the reference.
    pub fn check(&self, task: &Task, bytes: &[u8]) -> Verdict {
        let outputs = match outputs_from_bytes(task, bytes) {
            Ok(o) => o,
            Err(reason) => return Verdict::Mismatch(f64::INFINITY, reason),
        };
        let mut worst = 0.0f64;
        for (n, (got, want)) in outputs.iter().zip(&self.outputs).enumerate() {
            let (got, want) = (got.to_f64_vec(), want.to_f64_vec());
            for (flat, (&g, &w)) in got.iter().zip(&want).enumerate() {
                let err = relative_error(g, w);
                if err > self.tolerance {
                    let point = unflatten(flat, self.outputs[n].shape());
                    return Verdict::Mismatch(
                        err,
                        format!(
                            "output {n} at {point:?} is {g}, expected {w} (relative error {err:.2e} > tolerance {:.1e})",
                            self.tolerance
                        ),
                    );
                }
                worst = worst.max(err);
            }
        }
        Verdict::Match(worst)
    }
}

/// `|g − w| / max(1, |w|)`; two NaNs agree, a NaN and a number do not.
pub fn relative_error(g: f64, w: f64) -> f64 {
    if g.is_nan() || w.is_nan() {
        return if g.is_nan() && w.is_nan() {
            0.0
        } else {
            f64::INFINITY
        };
    }
    if g == w {
        return 0.0;
    }
    (g - w).abs() / w.abs().max(1.0)
}

fn unflatten(flat: usize, shape: &[usize]) -> Vec<i64> {
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    te::unflatten(flat, &dims)
}

/// Splits the concatenated raw outputs of a run into host tensors.
pub(crate) fn outputs_from_bytes(task: &Task, bytes: &[u8]) -> Result<Vec<HostTensor>, String> {
    let mut outputs = Vec::new();
    let mut rest = bytes;
    for (shape, dtype) in task.output_layouts() {
        let mut buffer = NdBuffer::zeros(&shape, dtype).map_err(|e| e.to_string())?;
        let size = buffer.as_bytes().len();
        if rest.len() < size {
            return Err(format!(
                "the worker returned {} output bytes, the outputs need more",
                bytes.len()
            ));
        }
        buffer.as_bytes_mut().copy_from_slice(&rest[..size]);
        rest = &rest[size..];
        outputs.push(buffer.to_host());
    }
    if !rest.is_empty() {
        return Err(format!(
            "the worker returned {} output bytes, {} more than the outputs hold",
            bytes.len(),
            rest.len()
        ));
    }
    Ok(outputs)
}

#[cfg(test)]
mod tests {
    use super::super::worker::perturb_element;
    use super::*;

    fn bytes_of(tensors: &[HostTensor]) -> Vec<u8> {
        tensors
            .iter()
            .flat_map(|t| {
                NdBuffer::from_host(t)
                    .expect("allocates")
                    .as_bytes()
                    .to_vec()
            })
            .collect()
    }

    #[test]
    fn the_interpreter_result_matches_itself_and_catches_a_changed_element() {
        let task = Task::from_registry("matmul", "M=8,N=8,K=8").expect("task");
        let reference = Reference::from_interpreter(&task).expect("evaluates");
        let exact = te::evaluate(task.dag(), &task.inputs()).expect("evaluates");
        let mut bytes = bytes_of(&exact);
        assert_eq!(reference.check(&task, &bytes), Verdict::Match(0.0));
        bytes[4 * 9 + 3] ^= 0x40; // the exponent of element 9
        assert!(matches!(
            reference.check(&task, &bytes),
            Verdict::Mismatch(..)
        ));
        assert!(matches!(
            reference.check(&task, &bytes[1..]),
            Verdict::Mismatch(..)
        ));
    }

    #[test]
    fn a_change_of_ten_tolerances_is_caught_and_of_a_tenth_is_not() {
        let task = Task::from_registry("matmul", "M=8,N=8,K=8").expect("task");
        let reference = Reference::from_interpreter(&task).expect("evaluates");
        let exact = bytes_of(&te::evaluate(task.dag(), &task.inputs()).expect("evaluates"));
        let perturbed = |tolerances: f64| {
            let mut bytes = exact.clone();
            let relative_error = tolerances * tolerance(&task);
            perturb_element(&mut bytes, te::DType::F32, 32, relative_error).expect("f32");
            reference.check(&task, &bytes)
        };
        assert!(
            matches!(perturbed(10.0), Verdict::Mismatch(..)),
            "{:?}",
            perturbed(10.0)
        );
        let Verdict::Match(seen) = perturbed(0.1) else {
            panic!("{:?}", perturbed(0.1));
        };
        assert!(
            seen > 0.05 * tolerance(&task),
            "the change was not seen: {seen}"
        );
    }

    #[test]
    fn a_kernel_result_is_trusted_only_if_its_samples_match() {
        let task = Task::from_registry("conv2d", "N=1,C=3,H=6,W=6,K=2,R=3,S=3,stride=1,pad=1")
            .expect("task");
        let exact = te::evaluate(task.dag(), &task.inputs()).expect("evaluates");
        let bytes = bytes_of(&exact);
        Reference::from_checked_kernel(&task, &bytes).expect("matches");
        let mut last_wrong = bytes.clone();
        let n = last_wrong.len();
        last_wrong[n - 2] ^= 0x40;
        let err = Reference::from_checked_kernel(&task, &last_wrong).expect_err("last element");
        assert!(err.to_string().contains("code generation bug"), "{err}");
    }

    #[test]
    fn nan_agrees_only_with_nan() {
        assert_eq!(relative_error(f64::NAN, f64::NAN), 0.0);
        assert_eq!(relative_error(1.0, f64::NAN), f64::INFINITY);
        assert!(relative_error(1000.0, 1000.01) < 1e-4);
    }
}
