//! The kernels a benchmark times, each with its own buffers: run once and
//! checked against the default schedule's outputs, then timed one repeat
//! of each in turn, so that a change in the machine's load touches all
//! of them alike.

use crate::codegen::Kernel;
use crate::measure::{Timing, TimingOptions, relative_error, time_runs};
use crate::runtime::NdBuffer;
use crate::te::HostTensor;

use super::error::BenchError;

/// A compiled kernel and its arguments (inputs, then outputs).
pub(super) struct Contender {
    pub kernel: Kernel,
    buffers: Vec<NdBuffer>,
}

impl Contender {
    /// `kernel` with buffers holding `inputs` and poisoned outputs, run once.
    pub fn run_once(kernel: Kernel, inputs: &[HostTensor]) -> Result<Contender, BenchError> {
        let buffers = kernel.buffers_for(inputs)?;
        let mut contender = Contender { kernel, buffers };
        contender.run()?;
        Ok(contender)
    }

    fn run(&mut self) -> Result<(), BenchError> {
        let mut refs: Vec<&mut NdBuffer> = self.buffers.iter_mut().collect();
        Ok(self.kernel.run(&mut refs)?)
    }

    /// The largest relative error of its outputs against `reference`'s.
    pub fn error_against(&self, reference: &Contender) -> f64 {
        let n_in = self.kernel.num_inputs();
        self.buffers[n_in..]
            .iter()
            .zip(&reference.buffers[reference.kernel.num_inputs()..])
            .map(|(got, want)| {
                let (got, want) = (got.to_host().to_f64_vec(), want.to_host().to_f64_vec());
                got.iter()
                    .zip(&want)
                    .map(|(&g, &w)| relative_error(g, w))
                    .fold(0.0, f64::max)
            })
            .fold(0.0, f64::max)
    }

    /// Its outputs, as the last run left them.
    pub fn outputs(&self) -> Vec<HostTensor> {
        self.buffers[self.kernel.num_inputs()..]
            .iter()
            .map(NdBuffer::to_host)
            .collect()
    }

    /// Runs once more, then times `repeat` repeats alone.
    pub fn time_alone(&mut self, repeat: usize) -> Result<Timing, BenchError> {
        self.run()?;
        let mut refs: Vec<&mut NdBuffer> = self.buffers.iter_mut().collect();
        let kernel = &self.kernel;
        Ok(time(repeat, || {
            let _ = kernel.run(&mut refs);
        }))
    }

    /// A run to time among others.
    pub fn timed_run(&mut self) -> Box<dyn FnMut() + '_> {
        let mut refs: Vec<&mut NdBuffer> = self.buffers.iter_mut().collect();
        let kernel = &self.kernel;
        Box::new(move || {
            let _ = kernel.run(&mut refs);
        })
    }
}

/// Times `run`: one warm-up, `repeat` repeats of at least 100 ms each.
fn time(repeat: usize, run: impl FnMut()) -> Timing {
    let options = TimingOptions {
        warmup: 1,
        number: 1,
        repeat,
        min_repeat_ms: 100.0,
        flush: crate::measure::CacheFlush::Off,
    };
    time_runs(&options, run, || {})
}

/// Times every contender `repeat` times, one repeat of each in turn.
pub(super) fn time_interleaved(
    repeat: usize,
    contenders: &mut [Box<dyn FnMut() + '_>],
) -> Vec<Timing> {
    let mut timings: Vec<Timing> = contenders
        .iter()
        .map(|_| Timing {
            costs: Vec::new(),
            number: 0,
        })
        .collect();
    for _ in 0..repeat.max(1) {
        for (run, timing) in contenders.iter_mut().zip(&mut timings) {
            let t = time(1, run);
            timing.costs.extend(t.costs);
            timing.number = t.number;
        }
    }
    timings
}
