//! GEMM f32: the committed tiled schedule (`examples/schedules/matmul_tiled.json`)
//! vs the untuned schedule vs the `matrixmultiply` and `gemm` crates, on the
//! same inputs, single thread and all threads; plus compile time of the
//! tiled kernel. `cargo bench --bench gemm`; `tessera bench` prints the same
//! comparison as ratios with the f32x4 FMA peak.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tessera::codegen::{self, CodegenOptions, Kernel};
use tessera::ops;
use tessera::runtime::{self, NdBuffer};
use tessera::schedule::{State, steps_from_json};
use tessera::te::{DType, HostTensor};
use tessera::tir;

fn kernel(n: i64, tiled: bool) -> Kernel {
    let op = ops::find("matmul").expect("registered");
    let shape = op.shape(&[("M", n), ("N", n), ("K", n)]).expect("valid");
    let dag = op.build(&shape).expect("builds");
    let state = if tiled {
        let text =
            std::fs::read_to_string("examples/schedules/matmul_tiled.json").expect("schedule file");
        State::replay(&dag, &steps_from_json(&text).expect("parses")).expect("applies")
    } else {
        State::new(&dag)
    };
    let func = tir::lower(&state).expect("lowers");
    codegen::compile(&func, &CodegenOptions::default()).expect("compiles")
}

fn buffers(n: usize) -> (NdBuffer, NdBuffer, NdBuffer) {
    let a = NdBuffer::from_host(&HostTensor::random(&[n, n], DType::F32, 1)).expect("a");
    let b = NdBuffer::from_host(&HostTensor::random(&[n, n], DType::F32, 2)).expect("b");
    (a, b, NdBuffer::zeros(&[n, n], DType::F32).expect("c"))
}

fn gemm_f32(c: &mut Criterion) {
    for n in [512usize, 1024] {
        let mut group = c.benchmark_group(format!("gemm_{n}"));
        group.sample_size(10);
        group.throughput(Throughput::Elements(2 * (n * n * n) as u64));
        let tiled = kernel(n as i64, true);
        let (mut a, mut b, mut out) = buffers(n);
        for threads in [1usize, 2] {
            runtime::set_num_threads(threads);
            group.bench_function(BenchmarkId::new("tessera_tiled", threads), |bench| {
                bench.iter(|| tiled.run(&mut [&mut a, &mut b, &mut out]))
            });
        }
        runtime::set_num_threads(1);
        if n == 512 {
            let naive = kernel(n as i64, false);
            group.bench_function("tessera_untuned", |bench| {
                bench.iter(|| naive.run(&mut [&mut a, &mut b, &mut out]))
            });
        }
        let (pa, pb) = (
            a.as_f32().expect("f32").to_vec(),
            b.as_f32().expect("f32").to_vec(),
        );
        let mut pc = vec![0f32; n * n];
        group.bench_function("matrixmultiply", |bench| {
            bench.iter(|| unsafe {
                matrixmultiply::sgemm(
                    n,
                    n,
                    n,
                    1.0,
                    pa.as_ptr(),
                    n as isize,
                    1,
                    pb.as_ptr(),
                    n as isize,
                    1,
                    0.0,
                    pc.as_mut_ptr(),
                    n as isize,
                    1,
                )
            })
        });
        for threads in [1usize, 2] {
            let parallelism = if threads == 1 {
                gemm::Parallelism::None
            } else {
                gemm::Parallelism::Rayon(threads)
            };
            group.bench_function(BenchmarkId::new("gemm", threads), |bench| {
                bench.iter(|| unsafe {
                    gemm::gemm(
                        n,
                        n,
                        n,
                        pc.as_mut_ptr(),
                        1,
                        n as isize,
                        false,
                        pa.as_ptr(),
                        1,
                        n as isize,
                        pb.as_ptr(),
                        1,
                        n as isize,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        parallelism,
                    )
                })
            });
        }
        group.finish();
    }
}

fn compile_time(c: &mut Criterion) {
    let mut group = c.benchmark_group("compile");
    group.sample_size(20);
    group.bench_function("matmul_tiled_1024", |bench| {
        bench.iter(|| kernel(1024, true))
    });
    group.finish();
}

criterion_group!(benches, gemm_f32, compile_time);
criterion_main!(benches);
