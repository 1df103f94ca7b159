//! Roofline arithmetic: the least a workload computes and moves
//! ([`Traffic`], from its DAG), which compute ceiling holds a kernel
//! ([`ComputeKind`], from its loop IR), and the least time a roofline allows
//! (`max(flops / compute, bytes / bandwidth)`), of which a measured time is
//! a fraction.

use serde::Serialize;

use crate::runtime::micro_kernels::{self, Isa};
use crate::te::ComputeDag;
use crate::tir::{PrimFunc, Stmt};

/// What one run of a workload computes and moves at the least: its flops
/// (as [`ComputeDag::flop_count`] counts them) and the bytes of its inputs
/// and outputs, each read or written once. A schedule can only move more
/// (re-reads, intermediate buffers), so the roofline built on these bytes
/// bounds every schedule of the workload.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Traffic {
    /// Floating-point operations.
    pub flops: f64,
    /// Bytes of the inputs and outputs.
    pub bytes: f64,
}

impl Traffic {
    /// The traffic of `dag`.
    pub fn of_dag(dag: &ComputeDag) -> Traffic {
        let tensor_bytes =
            |t: &crate::te::Tensor| t.num_elements() as f64 * t.dtype().size_bytes() as f64;
        let inputs: f64 = dag.inputs().iter().map(tensor_bytes).sum();
        let outputs: f64 = dag.outputs().into_iter().map(tensor_bytes).sum();
        Traffic {
            flops: dag.flop_count() as f64,
            bytes: inputs + outputs,
        }
    }

    /// Arithmetic intensity: flops per byte moved.
    pub fn intensity(&self) -> f64 {
        self.flops / self.bytes
    }
}

/// Which compute ceiling holds a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeKind {
    /// The f32x4 FMA throughput of Cranelift's code: a kernel made of it alone.
    F32x4,
    /// The widest ISA's FMA throughput: a kernel that calls full-width
    /// micro-kernels or row primitives.
    Widest,
}

impl ComputeKind {
    /// The kind that holds `func`: [`Widest`](ComputeKind::Widest) when it
    /// calls a micro-kernel, a row primitive or a stencil wider than 128 bits, else
    /// [`F32x4`](ComputeKind::F32x4).
    pub fn of_kernel(func: &PrimFunc) -> ComputeKind {
        let mut wide = false;
        func.body.visit(&mut |stmt| {
            if let Stmt::MicroKernelCall(call) = stmt {
                // An unknown name is held to the widest: the bound stays an upper bound.
                wide |= micro_kernels::find(&call.kernel).is_none_or(|k| k.isa > Isa::Sse);
            }
            if let Stmt::RowMathCall(call) = stmt {
                wide |= call.isa > Isa::Sse;
            }
            if let Stmt::StencilCall(call) = stmt {
                wide |= call.isa > Isa::Sse;
            }
        });
        if wide {
            ComputeKind::Widest
        } else {
            ComputeKind::F32x4
        }
    }
}

/// Which ceiling a roofline's least time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The flops at the compute ceiling take longer than the bytes.
    Compute,
    /// The bytes at the bandwidth ceiling take longer than the flops.
    Bandwidth,
}

/// A compute ceiling and a bandwidth ceiling, on the threads a kernel runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    /// GFLOP/s.
    pub compute_gflops: f64,
    /// GB/s.
    pub bandwidth_gbps: f64,
}

impl Roofline {
    /// Flops per byte at which both ceilings take equally long.
    pub fn machine_balance(&self) -> f64 {
        self.compute_gflops / self.bandwidth_gbps
    }

    /// `min(compute, intensity × bandwidth)`, in GFLOP/s.
    pub fn attainable_gflops(&self, intensity: f64) -> f64 {
        self.compute_gflops.min(intensity * self.bandwidth_gbps)
    }

    /// Which ceiling bounds `traffic` (compute on a tie).
    pub fn bound(&self, traffic: &Traffic) -> Bound {
        if traffic.intensity() >= self.machine_balance() {
            Bound::Compute
        } else {
            Bound::Bandwidth
        }
    }

    /// The least time `traffic` takes under this roofline, in seconds:
    /// `max(flops / compute, bytes / bandwidth)` (defined for a workload
    /// without flops too).
    pub fn min_seconds(&self, traffic: &Traffic) -> f64 {
        let compute = traffic.flops / (self.compute_gflops * 1e9);
        let memory = traffic.bytes / (self.bandwidth_gbps * 1e9);
        compute.max(memory)
    }

    /// The fraction of the roofline a run of `seconds` reaches:
    /// [`min_seconds`](Roofline::min_seconds)` / seconds` (for a workload
    /// with flops, its GFLOP/s over the attainable GFLOP/s).
    pub fn fraction(&self, traffic: &Traffic, seconds: f64) -> f64 {
        self.min_seconds(traffic) / seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::State;

    fn traffic_of(op: &str, shape: &str) -> Traffic {
        let task = crate::measure::Task::from_registry(op, shape).expect("task");
        Traffic::of_dag(task.dag())
    }

    #[test]
    fn traffic_counts_inputs_and_outputs_once() {
        let matmul = traffic_of("matmul", "M=64,N=32,K=16");
        assert_eq!(matmul.flops, 2.0 * 64.0 * 32.0 * 16.0);
        assert_eq!(
            matmul.bytes,
            4.0 * (64.0 * 16.0 + 16.0 * 32.0 + 64.0 * 32.0)
        );
        let relu = traffic_of("relu", "M=10,N=100");
        assert_eq!(relu.bytes, 4.0 * 2000.0);
        assert!(relu.intensity() <= 0.25, "{relu:?}");
        assert!(matmul.intensity() > 4.0, "{matmul:?}");
    }

    #[test]
    fn the_roofline_takes_the_slower_ceiling() {
        let roofline = Roofline {
            compute_gflops: 100.0,
            bandwidth_gbps: 20.0,
        };
        assert_eq!(roofline.machine_balance(), 5.0);
        let memory_bound = Traffic {
            flops: 1e9,
            bytes: 1e9,
        };
        assert_eq!(roofline.bound(&memory_bound), Bound::Bandwidth);
        assert_eq!(roofline.attainable_gflops(memory_bound.intensity()), 20.0);
        assert!((roofline.min_seconds(&memory_bound) - 0.05).abs() < 1e-12);
        assert!((roofline.fraction(&memory_bound, 0.1) - 0.5).abs() < 1e-12);
        let compute_bound = Traffic {
            flops: 1e10,
            bytes: 1e9,
        };
        assert_eq!(roofline.bound(&compute_bound), Bound::Compute);
        assert_eq!(roofline.attainable_gflops(compute_bound.intensity()), 100.0);
        // The fraction by time is GFLOP/s over attainable GFLOP/s.
        let seconds = 0.4;
        let by_gflops = compute_bound.flops / seconds / 1e9 / 100.0;
        assert!((roofline.fraction(&compute_bound, seconds) - by_gflops).abs() < 1e-12);
        let copy = Traffic {
            flops: 0.0,
            bytes: 2e9,
        };
        assert_eq!(roofline.bound(&copy), Bound::Bandwidth);
        assert!((roofline.fraction(&copy, 0.2) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn only_a_wide_micro_kernel_call_holds_a_kernel_to_the_widest_ceiling() {
        let task = crate::measure::Task::from_registry("matmul", "M=64,N=64,K=64").expect("task");
        let plain = crate::tir::lower(&State::new(task.dag())).expect("lowers");
        assert_eq!(ComputeKind::of_kernel(&plain), ComputeKind::F32x4);
        let target = crate::runtime::Target::host();
        for kernel in target.kernels() {
            let tile = |iter: &str, factor: usize| {
                format!(r#"{{"kind":"split","stage":"C","iter":"{iter}","factors":[{factor}]}}"#)
            };
            let steps = format!(
                r#"[{}, {}, {{"kind":"reorder","stage":"C","order":["i0.0","i1.0","k","i0.1","i1.1"]}},
                    {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{}"}}]"#,
                tile("i0", kernel.mr),
                tile("i1", kernel.nr),
                kernel.name
            );
            let Ok(steps) = serde_json::from_str::<Vec<crate::schedule::Step>>(&steps) else {
                panic!("steps of {}", kernel.name);
            };
            let state = State::replay(task.dag(), &steps).expect("replays");
            let func = crate::tir::lower(&state).expect("lowers");
            let expected = if kernel.isa > Isa::Sse {
                ComputeKind::Widest
            } else {
                ComputeKind::F32x4
            };
            assert_eq!(ComputeKind::of_kernel(&func), expected, "{}", kernel.name);
        }
    }

    #[test]
    fn a_row_math_call_holds_a_kernel_to_the_widest_ceiling() {
        let task = crate::measure::Task::from_registry("gelu", "M=4,N=32").expect("task");
        let target = crate::runtime::Target::host();
        for isa in crate::runtime::row_math::allowed_isas(&target) {
            let steps = format!(
                r#"[{{"kind":"split","stage":"gelu","iter":"i1","factors":[8]}},
                    {{"kind":"annotate","stage":"gelu","iter":"i1.1","annotation":"vectorize"}},
                    {{"kind":"row_math","stage":"gelu","iter":"i1.1","isa":"{}"}}]"#,
                isa.name()
            );
            let Ok(steps) = serde_json::from_str::<Vec<crate::schedule::Step>>(&steps) else {
                panic!("steps of {isa}");
            };
            let state = State::replay(task.dag(), &steps).expect("replays");
            let func = crate::tir::lower(&state).expect("lowers");
            assert_eq!(ComputeKind::of_kernel(&func), ComputeKind::Widest, "{isa}");
        }
    }
}
