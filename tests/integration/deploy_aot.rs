//! Ahead-of-time kernels: `deploy::aot::write_aot` writes an object file, a
//! C header and the C runtime; the system C compiler links them into a
//! program that calls the kernel, and the program's results are checked
//! against a naive C loop, against the te interpreter (which shares no code
//! with the compiled kernel) and against the JIT kernel (which shares it
//! all).
//!
//! These tests need the system C compiler `cc`; without it they fail.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::Scratch;
use common::double_double::DoubleDouble;

use tessera::codegen::{self, CodegenOptions};
use tessera::deploy::aot::{AotError, AotFiles, KERNELS_FILE, RUNTIME_FILE, write_aot};
use tessera::ops;
use tessera::schedule::{Annotation, State, Step, steps_from_json};
use tessera::te::{self, ComputeDag, DType, HostData, HostTensor};
use tessera::tir::{self, ForKind, PrimFunc, Stmt};

/// Runs `command`, failing the test clearly when it cannot be started.
fn run(command: &mut Command, what: &str) -> Output {
    command.output().unwrap_or_else(|e| {
        panic!(
            "cannot run {what} ({:?}): {e}. These tests need the system C compiler \
             `cc` (install gcc or clang).",
            command.get_program()
        )
    })
}

/// Compiles and links a C program with `cc`, warnings as errors.
fn cc(dir: &Path, sources: &[&Path], output: &Path) {
    let mut command = Command::new("cc");
    command
        .args(["-O2", "-Wall", "-Werror", "-I"])
        .arg(dir)
        .args(sources)
        .args(["-lm", "-lpthread", "-o"])
        .arg(output);
    let out = run(&mut command, "the C compiler");
    assert!(
        out.status.success(),
        "cc failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Whether `func` has a loop of `kind`.
fn has_loop(func: &PrimFunc, kind: ForKind) -> bool {
    let mut found = false;
    func.body.visit(&mut |s| {
        if let Stmt::For { kind: k, .. } = s {
            found |= *k == kind;
        }
    });
    found
}

/// Whether the object file names `symbol` (defined or imported).
fn mentions(object: &[u8], symbol: &str) -> bool {
    let mut needle = symbol.as_bytes().to_vec();
    needle.push(0);
    object.windows(needle.len()).any(|w| w == needle)
}

/// The matmul at `shape` with the committed tiled schedule (parallel outer
/// loop, vectorized inner loops, a cached tile of B).
fn tiled_matmul(shape: &str) -> (ComputeDag, PrimFunc) {
    let spec = ops::find("matmul").expect("matmul is registered");
    let shape = spec.parse_shape(shape).expect("matmul shape");
    let dag = spec.build(&shape).expect("matmul builds");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/schedules/matmul_tiled.json");
    let text = std::fs::read_to_string(&path).expect("read matmul_tiled.json");
    let steps = steps_from_json(&text).expect("matmul_tiled.json parses");
    let state = State::replay(&dag, &steps).expect("the schedule replays");
    let func = tir::lower(&state).expect("the schedule lowers");
    (dag, func)
}

#[test]
fn aot_matmul_links_and_matches_a_naive_loop() {
    // K = 520: the 520×16 tile of B (33 KB) is heap-allocated in each
    // parallel chunk, so the object also calls tessera_alloc/tessera_free.
    let (dag, func) = tiled_matmul("M=96,N=80,K=520");
    assert!(
        has_loop(&func, ForKind::Parallel),
        "a parallel loop:\n{func}"
    );
    assert!(
        has_loop(&func, ForKind::Vectorized),
        "a vector loop:\n{func}"
    );
    let (dir, files) = matmul_aot(&dag, &func, "aot-matmul");
    let description = dag.workload_key().to_string();
    assert_eq!(files.object, dir.join("matmul.o"));
    assert_eq!(files.header, dir.join("matmul.h"));
    assert_eq!(files.runtime, dir.join(RUNTIME_FILE));

    let object = std::fs::read(&files.object).expect("read the object");
    assert_eq!(&object[..4], b"\x7fELF", "an ELF object");
    for symbol in [
        "matmul",
        "tessera_parallel_for",
        "tessera_alloc",
        "tessera_free",
    ] {
        assert!(mentions(&object, symbol), "the object lacks {symbol}");
    }
    let header = std::fs::read_to_string(&files.header).expect("read the header");
    for line in [
        "#ifndef TESSERA_MATMUL_H",
        "#include <stdint.h>",
        "#define MATMUL_A_DIM0 96",
        "#define MATMUL_A_DIM1 520",
        "#define MATMUL_B_DIM1 80",
        "#define MATMUL_C_SIZE 7680",
        "void matmul(void **args);",
        "static inline void matmul_call(const float *A, const float *B, float *C) {",
        &description,
    ] {
        assert!(
            header.contains(line),
            "the header lacks {line:?}:\n{header}"
        );
    }
    // The runtime alone compiles without warnings.
    let runtime_object = dir.join("runtime.o");
    let out = run(
        Command::new("cc")
            .args(["-O2", "-Wall", "-Wextra", "-Werror", "-c"])
            .arg(&files.runtime)
            .arg("-o")
            .arg(&runtime_object),
        "the C compiler",
    );
    assert!(
        out.status.success(),
        "{RUNTIME_FILE}: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    link_and_run_matmul(&dir, &files.runtime, &files.object);
}

/// Writes `func`, a matmul kernel of `dag`, ahead of time as `matmul` into
/// a new scratch folder `name`.
fn matmul_aot(dag: &ComputeDag, func: &PrimFunc, name: &str) -> (Scratch, AotFiles) {
    let dir = Scratch::new(name);
    let description = dag.workload_key().to_string();
    let files = write_aot(
        func,
        "matmul",
        &description,
        &dir,
        &CodegenOptions::default(),
    )
    .expect("write_aot");
    (dir, files)
}

/// Links `examples/aot/main.c` with the runtime and a matmul object into a
/// program, runs it with 1, 3 and the default threads and checks that it
/// matched its naive loop.
fn link_and_run_matmul(dir: &Path, runtime: &Path, object: &Path) {
    let main = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/aot/main.c");
    let program = dir.join("matmul_aot");
    cc(dir, &[&main, runtime, object], &program);
    // One thread, an uneven split over 3 threads, and the machine's default.
    for threads in [Some("1"), Some("3"), None] {
        let mut command = Command::new(&program);
        match threads {
            Some(n) => command.env("TESSERA_THREADS", n),
            None => command.env_remove("TESSERA_THREADS"),
        };
        let out = run(&mut command, "the linked program");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "threads {threads:?}: {}\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.contains("max error") && stdout.trim_end().ends_with("OK"),
            "{stdout}"
        );
    }
}

#[test]
fn aot_long_copies_call_the_runtime_copy() {
    // The copy out of a 70x70 cache: one tessera_copy call per row.
    let spec = ops::find("matmul").expect("matmul is registered");
    let shape = spec.parse_shape("M=70,N=70,K=3").expect("matmul shape");
    let dag = spec.build(&shape).expect("matmul builds");
    let steps = steps_from_json(
        r#"[{"kind": "cache_write", "stage": "C"},
            {"kind": "annotate", "stage": "C", "iter": "i1", "annotation": "vectorize"}]"#,
    )
    .expect("the steps parse");
    let state = State::replay(&dag, &steps).expect("the schedule replays");
    let func = tir::lower(&state).expect("the schedule lowers");
    assert!(
        codegen::decisions(&func)
            .vector_loops
            .iter()
            .any(|l| l.copy),
        "a copy call:\n{func}"
    );
    let (dir, files) = matmul_aot(&dag, &func, "aot-copy");
    let object = std::fs::read(&files.object).expect("read the object");
    assert!(
        mentions(&object, "tessera_copy"),
        "the object lacks tessera_copy"
    );
    link_and_run_matmul(&dir, &files.runtime, &files.object);
}

/// Elementwise math: `p`, f64 math that tessera implements by calling host
/// functions (exp, log, tanh, sigmoid, erf, pow); `q`, f32 pow (a host call
/// too); `r`, the f32 intrinsics generated inline as polynomials (exp,
/// tanh, sigmoid, erf, log). No registered op uses the f64 ones (the
/// registry is f32), so the test builds its own.
fn math_dag(rows: i64, cols: i64) -> ComputeDag {
    let x = te::placeholder("x", &[rows, cols], DType::F64);
    let y = te::placeholder("y", &[rows, cols], DType::F64);
    let u = te::placeholder("u", &[rows, cols], DType::F32);
    let v = te::placeholder("v", &[rows, cols], DType::F32);
    let p = te::compute("p", &[rows, cols], |ix| {
        let (xv, yv) = (x.at([&ix[0], &ix[1]]), y.at([&ix[0], &ix[1]]));
        te::exp(xv.clone()) * te::tanh(yv.clone())
            + te::log(yv.clone())
            + te::sigmoid(xv.clone())
            + te::erf(xv.clone())
            + te::pow(yv, xv)
    });
    let q = te::compute("q", &[rows, cols], |ix| {
        te::pow(u.at([&ix[0], &ix[1]]), v.at([&ix[0], &ix[1]]))
    });
    let r = te::compute("r", &[rows, cols], |ix| {
        let (uv, vv) = (u.at([&ix[0], &ix[1]]), v.at([&ix[0], &ix[1]]));
        te::exp(vv.clone())
            + te::tanh(vv.clone())
            + te::sigmoid(vv.clone())
            + te::erf(vv)
            + te::log(uv)
    });
    ComputeDag::new(&[x, y, u, v], &[p, q, r]).expect("the math DAG is valid")
}

/// The C program for the math kernel: reads the inputs from argv[1], calls
/// the kernel, writes the outputs to argv[2].
const MATH_MAIN: &str = r#"#include <stdio.h>
#include "mathk.h"

static double x[MATHK_X_SIZE], y[MATHK_Y_SIZE], p[MATHK_P_SIZE];
static float u[MATHK_U_SIZE], v[MATHK_V_SIZE], q[MATHK_Q_SIZE], r[MATHK_R_SIZE];

int main(int argc, char **argv) {
  if (argc != 3) return 2;
  FILE *in = fopen(argv[1], "rb");
  if (in == NULL) return 3;
  int ok = fread(x, sizeof x[0], MATHK_X_SIZE, in) == MATHK_X_SIZE &&
           fread(y, sizeof y[0], MATHK_Y_SIZE, in) == MATHK_Y_SIZE &&
           fread(u, sizeof u[0], MATHK_U_SIZE, in) == MATHK_U_SIZE &&
           fread(v, sizeof v[0], MATHK_V_SIZE, in) == MATHK_V_SIZE;
  fclose(in);
  if (!ok) return 4;
  mathk_call(x, y, u, v, p, q, r);
  FILE *out = fopen(argv[2], "wb");
  if (out == NULL) return 5;
  ok = fwrite(p, sizeof p[0], MATHK_P_SIZE, out) == MATHK_P_SIZE &&
       fwrite(q, sizeof q[0], MATHK_Q_SIZE, out) == MATHK_Q_SIZE &&
       fwrite(r, sizeof r[0], MATHK_R_SIZE, out) == MATHK_R_SIZE;
  return fclose(out) == 0 && ok ? 0 : 6;
}
"#;

fn f64_tensor(shape: &[usize], f: impl Fn(usize) -> f64) -> HostTensor {
    let n = shape.iter().product();
    HostTensor::new(shape, HostData::F64((0..n).map(f).collect())).expect("f64 tensor")
}

fn f32_tensor(shape: &[usize], f: impl Fn(usize) -> f32) -> HostTensor {
    let n = shape.iter().product();
    HostTensor::new(shape, HostData::F32((0..n).map(f).collect())).expect("f32 tensor")
}

#[test]
fn aot_math_kernel_links_host_functions_and_matches_the_interpreter_and_the_jit() {
    let (rows, cols) = (7usize, 12usize);
    let dag = math_dag(rows as i64, cols as i64);
    let mut state = State::new(&dag);
    for step in [
        Step::Split {
            stage: "p".into(),
            iter: "i1".into(),
            factors: vec![4],
        },
        Step::Annotate {
            stage: "p".into(),
            iter: "i1.1".into(),
            annotation: Annotation::Vectorize,
        },
        Step::Annotate {
            stage: "p".into(),
            iter: "i0".into(),
            annotation: Annotation::Parallel,
        },
        Step::Split {
            stage: "r".into(),
            iter: "i1".into(),
            factors: vec![4],
        },
        Step::Annotate {
            stage: "r".into(),
            iter: "i1.1".into(),
            annotation: Annotation::Vectorize,
        },
    ] {
        state.apply(step).expect("the math schedule applies");
    }
    let func = tir::lower(&state).expect("the math DAG lowers");
    assert!(
        has_loop(&func, ForKind::Parallel),
        "a parallel loop:\n{func}"
    );
    assert!(
        has_loop(&func, ForKind::Vectorized),
        "a vector loop:\n{func}"
    );
    let names: Vec<String> = codegen::kernel_params(&func)
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["x", "y", "u", "v", "p", "q", "r"]);

    let dir = Scratch::new("aot-math");
    let files = write_aot(
        &func,
        "mathk",
        "f64 math (exp log tanh sigmoid erf pow), f32 pow, f32 inline intrinsics",
        &dir,
        &CodegenOptions::default(),
    )
    .expect("write_aot");
    let object = std::fs::read(&files.object).expect("read the object");
    // Every runtime import but the heap (this kernel's buffers fit the stack),
    // the copy (it copies nothing) and the fork: its parallel loop does far
    // less work than MIN_PARALLEL_STORES, so it runs serially (the matmul
    // tests above link the fork and the copy).
    for &symbol in codegen::RUNTIME_IMPORTS.iter().filter(|s| {
        !matches!(
            **s,
            "tessera_alloc" | "tessera_free" | "tessera_parallel_for" | "tessera_copy"
        )
    }) {
        assert!(mentions(&object, symbol), "the object lacks {symbol}");
    }
    assert!(
        ((rows * cols) as u64) < codegen::MIN_PARALLEL_STORES
            && !mentions(&object, "tessera_parallel_for"),
        "a parallel loop too small to pay for a fork runs serially"
    );

    // Inputs: x in [-3, 3], y in [0.5, 3] (log and pow need y > 0), u in
    // [0.1, 2], v in [-2, 2].
    let shape = [rows, cols];
    let n = rows * cols;
    let t = |i: usize| ((i * 37) % n) as f64 / (n - 1) as f64;
    let inputs = [
        f64_tensor(&shape, |i| -3.0 + 6.0 * t(i)),
        f64_tensor(&shape, |i| 0.5 + 2.5 * t(i * 5 + 1)),
        f32_tensor(&shape, |i| (0.1 + 1.9 * t(i * 3 + 2)) as f32),
        f32_tensor(&shape, |i| (-2.0 + 4.0 * t(i * 7 + 3)) as f32),
    ];
    let mut bytes = Vec::new();
    for input in &inputs {
        match input.data() {
            HostData::F64(v) => v.iter().for_each(|a| bytes.extend(a.to_ne_bytes())),
            HostData::F32(v) => v.iter().for_each(|a| bytes.extend(a.to_ne_bytes())),
            other => panic!("unexpected input data {other:?}"),
        }
    }
    let input_file = dir.join("inputs.bin");
    let output_file = dir.join("outputs.bin");
    std::fs::write(&input_file, &bytes).expect("write the inputs");
    let main = dir.join("main.c");
    std::fs::write(&main, MATH_MAIN).expect("write main.c");
    let program = dir.join("math_aot");
    cc(&dir, &[&main, &files.runtime, &files.object], &program);
    let out = run(
        Command::new(&program)
            .env("TESSERA_THREADS", "3")
            .arg(&input_file)
            .arg(&output_file),
        "the linked program",
    );
    assert!(
        out.status.success(),
        "{}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let produced = std::fs::read(&output_file).expect("read the outputs");
    assert_eq!(produced.len(), n * 8 + 2 * n * 4, "p (f64), q and r (f32)");
    let c_p: Vec<f64> = produced[..n * 8]
        .chunks_exact(8)
        .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .collect();
    let f32s = |bytes: &[u8]| -> Vec<f32> {
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes(b.try_into().expect("4 bytes")))
            .collect()
    };
    let (c_q, c_r) = (f32s(&produced[n * 8..n * 12]), f32s(&produced[n * 12..]));

    let kernel = codegen::compile(&func, &CodegenOptions::default()).expect("JIT compile");
    let jit = kernel.run_host(&inputs).expect("JIT run");
    let (HostData::F64(jit_p), HostData::F32(jit_q), HostData::F32(jit_r)) =
        (jit[0].data(), jit[1].data(), jit[2].data())
    else {
        panic!("unexpected JIT output types");
    };
    // Same generated code; the host math differs only where the C library's
    // erf differs from the Rust one (an ulp or so).
    let mut max_p = 0.0f64;
    for (i, (c, j)) in c_p.iter().zip(jit_p).enumerate() {
        let error = (c - j).abs() / j.abs().max(1.0);
        assert!(error <= 1e-13, "p[{i}]: C {c}, JIT {j}");
        max_p = max_p.max(error);
    }
    let mut max_q = 0.0f32;
    for (i, (c, j)) in c_q.iter().zip(jit_q).enumerate() {
        let error = (c - j).abs() / j.abs().max(1.0);
        assert!(error <= 1e-6, "q[{i}]: C {c}, JIT {j}");
        max_q = max_q.max(error);
    }
    // Inline code only: the same instructions give the same bits.
    for (i, (c, j)) in c_r.iter().zip(jit_r).enumerate() {
        assert_eq!(c.to_bits(), j.to_bits(), "r[{i}]: C {c}, JIT {j}");
    }
    eprintln!("C vs JIT: max relative error p {max_p:e}, q {max_q:e}, r bit for bit");
    check_math_against_the_interpreter(&dag, &inputs, &c_p, &c_q, &c_r);
}

/// The AOT program's outputs against the te interpreter, which computes in
/// f64 with Rust's math (the program links the C library's and runs
/// tessera's polynomials), within bounds derived from each function's:
/// |error| ≤ bound · ε · Σ|terms| of each sum, the magnitudes computed in
/// double-double.
fn check_math_against_the_interpreter(
    dag: &ComputeDag,
    inputs: &[HostTensor],
    c_p: &[f64],
    c_q: &[f32],
    c_r: &[f32],
) {
    let want = te::evaluate(dag, inputs).expect("the interpreter runs");
    let (want_p, want_q, want_r) = (
        want[0].to_f64_vec(),
        want[1].to_f64_vec(),
        want[2].to_f64_vec(),
    );
    let [x, y, u, v] = [0, 1, 2, 3].map(|i| inputs[i].to_f64_vec());
    let dd = DoubleDouble::from_f64;
    for i in 0..c_p.len() {
        // p, on each side: five host functions (≤ 2.5 ulp each, in either
        // library), a product and four additions (≤ ε/2 each); two sides.
        let (xd, yd) = (dd(x[i]), dd(y[i]));
        let terms = [
            (xd.exp() * yd.tanh()).to_f64(),
            yd.ln().to_f64(),
            xd.sigmoid().to_f64(),
            xd.erf().to_f64(),
            yd.pow(x[i]).to_f64(),
        ];
        let magnitude: f64 = terms.iter().map(|t| t.abs()).sum();
        let bound = 2.0 * (2.5 + 2.5) * f64::EPSILON * magnitude;
        let error = (c_p[i] - want_p[i]).abs();
        assert!(
            error <= bound,
            "p[{i}]: AOT {}, interpreter {}: error {error:e} > {bound:e}",
            c_p[i],
            want_p[i]
        );
        // q: powf (< 1 ulp) against pow in f64 rounded to f32 (½ ulp).
        let bound = 1.5 * f64::from(f32::EPSILON) * want_q[i].abs();
        let error = (f64::from(c_q[i]) - want_q[i]).abs();
        assert!(
            error <= bound,
            "q[{i}]: AOT {}, interpreter {}: error {error:e} > {bound:e}",
            c_q[i],
            want_q[i]
        );
        // r: the inline f32 kernels (≤ 2.5 ulp each, `intrinsics::`), four
        // f32 additions, and the interpreter's one rounding to f32.
        let (ud, vd) = (dd(u[i]), dd(v[i]));
        let terms = [vd.exp(), vd.tanh(), vd.sigmoid(), vd.erf(), ud.ln()];
        let magnitude: f64 = terms.iter().map(|t| t.to_f64().abs()).sum();
        let bound = (2.5 + 4.0 * 0.5 + 0.5) * f64::from(f32::EPSILON) * magnitude;
        let error = (f64::from(c_r[i]) - want_r[i]).abs();
        assert!(
            error <= bound,
            "r[{i}] (u = {}, v = {}): AOT {}, interpreter {}: error {error:e} > {bound:e}",
            u[i],
            v[i],
            c_r[i],
            want_r[i]
        );
    }
}

#[test]
fn aot_errors_name_the_path_and_leave_nothing_behind() {
    let (_, func) = tiled_matmul("M=8,N=16,K=4");
    let dir = Scratch::new("aot-errors");
    // A file where the output folder should be.
    let blocker = dir.join("blocker");
    std::fs::write(&blocker, b"not a folder").expect("write the blocker");
    let target = blocker.join("out");
    let err = write_aot(&func, "k", "", &target, &CodegenOptions::default())
        .expect_err("a file is in the way");
    assert!(matches!(err, AotError::Io { .. }), "{err}");
    assert!(
        err.to_string().contains(&blocker.display().to_string()),
        "the message names the path: {err}"
    );
    // A symbol that is not a C identifier is refused before anything is written.
    let out = dir.join("out");
    let err = write_aot(&func, "my-kernel", "", &out, &CodegenOptions::default())
        .expect_err("a dash is not allowed");
    assert!(matches!(err, AotError::InvalidSymbol(_)), "{err}");
    assert!(!out.exists());
    // Writing twice replaces the files and leaves no temporary ones.
    for _ in 0..2 {
        write_aot(&func, "k", "", &out, &CodegenOptions::default()).expect("write_aot");
    }
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("list the folder")
        .map(|e| {
            e.expect("folder entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    assert_eq!(names, ["k.h", "k.o", KERNELS_FILE, RUNTIME_FILE]);
}

/// A C program that runs the kernel `KSYM` (defined on the command line)
/// on raw f32 files: `prog INPUTS OUTPUTS (PATH COUNT)...`, inputs read,
/// outputs written after a NaN fill.
const RAW_DRIVER: &str = r#"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void KSYM(void **args);

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  int inputs = atoi(argv[1]), outputs = atoi(argv[2]);
  if (inputs + outputs > 16 || argc != 3 + 2 * (inputs + outputs)) return 2;
  void *args[16];
  for (int i = 0; i < inputs + outputs; i++) {
    long count = atol(argv[4 + 2 * i]);
    float *data = malloc((size_t)(count > 0 ? count : 1) * sizeof(float));
    if (!data) return 3;
    if (i < inputs) {
      FILE *f = fopen(argv[3 + 2 * i], "rb");
      if (!f || fread(data, sizeof(float), (size_t)count, f) != (size_t)count) return 4;
      fclose(f);
    } else {
      for (long j = 0; j < count; j++) data[j] = NAN;
    }
    args[i] = data;
  }
  KSYM(args);
  for (int i = inputs; i < inputs + outputs; i++) {
    long count = atol(argv[4 + 2 * i]);
    FILE *f = fopen(argv[3 + 2 * i], "wb");
    if (!f || fwrite(args[i], sizeof(float), (size_t)count, f) != (size_t)count) return 5;
    fclose(f);
  }
  puts("ran");
  return 0;
}
"#;

/// Compiles `dag` under `steps` ahead of time as `symbol` into `dir`, links
/// it with the runtime, the micro-kernels and [`RAW_DRIVER`], runs it on
/// random inputs and checks its outputs against the te interpreter.
fn check_aot_against_the_reference(
    dir: &Path,
    label: &str,
    dag: &ComputeDag,
    steps: &[Step],
    symbol: &str,
) {
    let state = State::replay(dag, steps).unwrap_or_else(|e| panic!("{label}: {e}"));
    let func = tir::lower(&state).unwrap_or_else(|e| panic!("{label}: {e}"));
    let files = write_aot(&func, symbol, label, dir, &CodegenOptions::default())
        .unwrap_or_else(|e| panic!("{label}: {e}"));
    let driver = dir.join("raw_driver.c");
    std::fs::write(&driver, RAW_DRIVER).expect("write the driver");
    let program = dir.join(format!("{symbol}_run"));
    let mut command = Command::new("cc");
    command
        .args(["-O2", "-Wall", "-Werror"])
        .arg(format!("-DKSYM={symbol}"))
        .args([&driver, &files.runtime, &files.kernels, &files.object])
        .args(["-lm", "-lpthread", "-o"])
        .arg(&program);
    let out = run(&mut command, "the C compiler");
    assert!(
        out.status.success(),
        "{label}: cc: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let inputs = common::random_inputs(dag, 7);
    let want = common::reference(dag, &inputs);
    let mut args: Vec<String> = vec![inputs.len().to_string(), want.len().to_string()];
    for (n, tensor) in inputs.iter().enumerate() {
        let path = dir.join(format!("{symbol}_in{n}.f32"));
        let bytes: Vec<u8> = tensor
            .as_f32()
            .expect("f32 input")
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        std::fs::write(&path, bytes).expect("write an input");
        args.extend([path.display().to_string(), tensor.len().to_string()]);
    }
    let outputs: Vec<std::path::PathBuf> = (0..want.len())
        .map(|n| dir.join(format!("{symbol}_out{n}.f32")))
        .collect();
    for (path, tensor) in outputs.iter().zip(&want) {
        args.extend([path.display().to_string(), tensor.len().to_string()]);
    }
    let out = run(Command::new(&program).args(&args), "the linked program");
    assert!(
        out.status.success(),
        "{label}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<HostTensor> = outputs
        .iter()
        .zip(&want)
        .map(|(path, tensor)| {
            let bytes = std::fs::read(path).expect("read an output");
            let values: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            HostTensor::from_f32(tensor.shape(), values).expect("output size")
        })
        .collect();
    common::assert_close(label, &got, &want, common::reduction_length(dag));
}

#[test]
fn aot_tensorized_kernels_of_every_isa_here_link_and_match_the_reference() {
    use crate::tensorize::step::{direct, packed};
    let target = tessera::runtime::Target::from_env();
    let coverage = common::isa_coverage(&target);
    let dir = Scratch::new("aot-tensorized");
    let matmul = |shape: &str| {
        let spec = ops::find("matmul").expect("matmul");
        spec.build(&spec.parse_shape(shape).expect("shape"))
            .expect("dag")
    };
    for kernel in coverage.kernels() {
        let (mr, nr) = (kernel.mr as i64, kernel.nr as i64);
        // Full tiles and edge tiles in both directions, K split with an edge.
        let dag = matmul(&format!("M={},N={},K=29", 3 * mr + 1, 2 * nr + 3));
        let label = format!("{} packed", kernel.name);
        check_aot_against_the_reference(
            &dir,
            &label,
            &dag,
            &packed(mr, nr, kernel.name),
            &format!("mm_{}", kernel.name),
        );
        let label = format!("{} direct", kernel.name);
        check_aot_against_the_reference(
            &dir,
            &label,
            &dag,
            &direct(mr, nr, Some(8), kernel.name),
            &format!("mm_direct_{}", kernel.name),
        );
    }
    // A dense layer: the weight [N, K] packed transposed per n block.
    let Some(kernel) = coverage.kernels().into_iter().max_by_key(|k| k.isa) else {
        panic!("no micro-kernel at all");
    };
    let spec = ops::find("dense").expect("dense");
    let dag = spec
        .build(&spec.parse_shape("M=13,N=45,K=19").expect("shape"))
        .expect("dag");
    let steps = steps_from_json(&format!(
        r#"[
        {{"kind":"cache_write","stage":"dense"}},
        {{"kind":"cache_read","stage":"weight","readers":["dense.local"],"layout":[1,0]}},
        {{"kind":"split","stage":"dense","iter":"i0","factors":[{mr}]}},
        {{"kind":"split","stage":"dense","iter":"i1","factors":[{nr}]}},
        {{"kind":"reorder","stage":"dense","order":["i1.0","i0.0","i0.1","i1.1"]}},
        {{"kind":"compute_at","stage":"dense.local","target":"dense","iter":"i0.0"}},
        {{"kind":"compute_at","stage":"weight.local","target":"dense","iter":"i1.0"}},
        {{"kind":"reorder","stage":"dense.local","order":["k","i0","i1"]}},
        {{"kind":"tensorize","stage":"dense.local","iter":"k","intrinsic":"{name}"}},
        {{"kind":"annotate","stage":"dense","iter":"i1.0","annotation":"parallel"}}
    ]"#,
        mr = kernel.mr,
        nr = kernel.nr,
        name = kernel.name
    ))
    .expect("steps");
    check_aot_against_the_reference(&dir, "dense transposed pack", &dag, &steps, "dense_packed");
    // Its bias and ReLU fused into the call: the C kernels' epilogue.
    let spec = ops::find("dense_bias_relu").expect("dense_bias_relu");
    let dag = spec
        .build(&spec.parse_shape("M=13,N=45,K=19").expect("shape"))
        .expect("dag");
    let steps = steps_from_json(&format!(
        r#"[
        {{"kind":"compute_inline","stage":"bias_add"}},
        {{"kind":"cache_read","stage":"weight","readers":["dense"],"layout":[1,0]}},
        {{"kind":"split","stage":"relu","iter":"i0","factors":[{mr}]}},
        {{"kind":"split","stage":"relu","iter":"i1","factors":[{nr}]}},
        {{"kind":"reorder","stage":"relu","order":["i1.0","i0.0","i0.1","i1.1"]}},
        {{"kind":"compute_at","stage":"dense","target":"relu","iter":"i0.0"}},
        {{"kind":"compute_at","stage":"weight.local","target":"relu","iter":"i1.0"}},
        {{"kind":"reorder","stage":"dense","order":["k","i0","i1"]}},
        {{"kind":"tensorize","stage":"dense","iter":"k","intrinsic":"{name}"}}
    ]"#,
        mr = kernel.mr,
        nr = kernel.nr,
        name = kernel.name
    ))
    .expect("steps");
    let state = tessera::schedule::State::replay(&dag, &steps).expect("replays");
    let lowered = tessera::tir::lower(&state).expect("lowers").to_string();
    assert!(
        lowered.contains("max(("),
        "the epilogue is fused:\n{lowered}"
    );
    check_aot_against_the_reference(&dir, "dense bias relu fused", &dag, &steps, "dense_fused");
    let header = std::fs::read_to_string(dir.join("dense_packed.h")).expect("header");
    assert!(
        header.contains(&format!(
            "Micro-kernels: {} ({})",
            kernel.name,
            kernel.isa.name()
        )) && header.contains(&format!(
            "#define DENSE_PACKED_ISA \"{}\"",
            kernel.isa.name()
        )) && header.contains("tessera_kernels.c dense_packed.o"),
        "{header}"
    );
}

#[test]
fn the_c_micro_kernels_are_the_registry_and_compile_without_warnings() {
    let source = tessera::deploy::aot::kernels_source();
    for kernel in tessera::runtime::micro_kernels::all_kernels() {
        let definition = format!("({}, {}, {})", kernel.name, kernel.mr, kernel.nr);
        assert!(source.contains(&definition), "{} missing", kernel.name);
    }
    let dir = Scratch::new("aot-kernels-c");
    let file = dir.join(tessera::deploy::aot::KERNELS_FILE);
    std::fs::write(&file, &source).expect("write");
    let out = run(
        Command::new("cc")
            .args(["-O2", "-Wall", "-Wextra", "-Werror", "-c"])
            .arg(&file)
            .arg("-o")
            .arg(dir.join("kernels.o")),
        "the C compiler",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_c_micro_kernel_stops_with_a_message_on_a_cpu_without_its_isa() {
    let widest = tessera::runtime::micro_kernels::all_kernels()
        .iter()
        .max_by_key(|k| k.isa)
        .expect("a kernel");
    let dir = Scratch::new("aot-kernels-isa");
    let kernels = dir.join(KERNELS_FILE);
    std::fs::write(&kernels, tessera::deploy::aot::kernels_source()).expect("write");
    let main = dir.join("call.c");
    let symbol = format!("tessera_micro_kernel_{}", widest.name);
    std::fs::write(
        &main,
        format!(
            r#"#include <stdint.h>
#include <stdio.h>
int tessera_cpu_supports(const char *isa);
void {symbol}(int64_t, const float *, int64_t, int64_t, const float *, int64_t, float *,
              int64_t, int64_t, int64_t, int64_t, const void *);
int main(void) {{
  static float a[64 * 64], b[64 * 64], c[64 * 64];
  printf("supports %d\n", tessera_cpu_supports("{isa}"));
  fflush(stdout);
  {symbol}(4, a, 4, 1, b, {nr}, c, {nr}, {mr}, {nr}, 0, NULL);
  puts("called");
  return 0;
}}
"#,
            isa = widest.isa.name(),
            mr = widest.mr,
            nr = widest.nr
        ),
    )
    .expect("write");
    let program = dir.join("call");
    cc(&dir, &[&main, &kernels], &program);
    let out = run(&mut Command::new(&program), "the program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if tessera::runtime::Target::from_env().cpu_isa() >= widest.isa {
        assert!(
            out.status.success() && stdout.contains("supports 1\ncalled"),
            "{stdout}{stderr}"
        );
    } else {
        assert!(!out.status.success(), "{stdout}");
        assert!(
            stdout.contains("supports 0") && !stdout.contains("called"),
            "{stdout}"
        );
        assert!(
            stderr.contains(&format!(
                "micro-kernel {} needs the {} instruction set, which this CPU lacks",
                widest.name,
                widest.isa.name()
            )),
            "{stderr}"
        );
    }
}

#[test]
fn the_c_runtime_keeps_freed_blocks_for_the_next_call_of_its_thread() {
    let dir = Scratch::new("aot-workspace");
    let program_source = dir.join("workspace.c");
    std::fs::write(
        &program_source,
        r#"#include <stdint.h>
#include <stdio.h>
#include <string.h>
void *tessera_alloc(int64_t bytes);
void tessera_free(void *ptr);
#define CHECK(c) do { if (!(c)) { printf("failed: %s\n", #c); return 1; } } while (0)
int main(void) {
  char *a = tessera_alloc(3 << 20);
  CHECK(a != NULL && (uintptr_t)a % 64 == 0);
  memset(a, 1, 3 << 20);
  tessera_free(a);
  CHECK(tessera_alloc(3 << 20) == a);       /* the same size: the same block */
  char *small = tessera_alloc(10000);
  tessera_free(small);
  tessera_free(a);
  CHECK(tessera_alloc(9000) == small);      /* the smallest that fits */
  char *big = tessera_alloc(8 << 20);       /* none fits: a new block */
  CHECK(big != NULL && big != small && big != a);
  memset(big, 2, 8 << 20);
  tessera_free(big);
  tessera_free(small);
  void *many[20];
  for (int i = 0; i < 20; i++) { many[i] = tessera_alloc((i + 1) * 8192); CHECK(many[i] != NULL); }
  for (int i = 0; i < 20; i++) tessera_free(many[i]);
  for (int i = 19; i >= 12; i--) CHECK(tessera_alloc((i + 1) * 8192) != NULL);
  tessera_free(NULL);
  CHECK(tessera_alloc(INT64_MAX) == NULL);
  printf("ok\n");
  return 0;
}
"#,
    )
    .expect("write the test program");
    let runtime = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/deploy/aot/tessera_runtime.c");
    let program = dir.join("workspace");
    cc(&dir, &[&program_source, &runtime], &program);
    let out = run(&mut Command::new(&program), "the workspace program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
