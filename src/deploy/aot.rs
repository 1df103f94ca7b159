//! Ahead-of-time deployment: a kernel compiled into a relocatable object
//! file, with a C header and a small C runtime, so that a C (or any
//! C-ABI) program links and calls the tuned kernel without a JIT.
//!
//! [`write_aot`] writes three files into a folder:
//!
//! - `<symbol>.o`: the kernel ([`codegen::compile_object`]), exporting
//!   `void <symbol>(void **args)`;
//! - `<symbol>.h`: the parameters' dimensions as `#define`s, the raw entry
//!   point and a typed wrapper `<symbol>_call(...)`;
//! - `tessera_runtime.c`: the functions kernels import (a pthread pool for
//!   parallel loops, aligned heap blocks, libm math), the same for every
//!   kernel.
//!
//! Build a program with `cc -O2 main.c tessera_runtime.c <symbol>.o -lm
//! -lpthread`. The object uses every ISA extension of the machine that
//! compiled it (named in the header), so it runs on CPUs that have them.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use thiserror::Error;

use crate::codegen::{self, CodegenError, CodegenOptions, KernelParam, is_c_identifier};
use crate::te::DType;
use crate::tir::PrimFunc;

/// The name of the C runtime file written next to every kernel.
pub const RUNTIME_FILE: &str = "tessera_runtime.c";

/// The files [`write_aot`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AotFiles {
    /// The relocatable object file, `<dir>/<symbol>.o`.
    pub object: PathBuf,
    /// The C header, `<dir>/<symbol>.h`.
    pub header: PathBuf,
    /// The C runtime, `<dir>/tessera_runtime.c`.
    pub runtime: PathBuf,
}

/// Why ahead-of-time files could not be written.
#[derive(Debug, Error)]
pub enum AotError {
    /// The symbol cannot name a C function.
    #[error(
        "AOT symbol '{0}' is not a C identifier: use letters, digits and '_', not starting with a digit"
    )]
    InvalidSymbol(String),
    /// The kernel could not be compiled.
    #[error("AOT compilation of '{symbol}' failed: {source}")]
    Codegen {
        /// The symbol being compiled.
        symbol: String,
        /// The code generator's error.
        #[source]
        source: CodegenError,
    },
    /// A file or folder could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// Compiles `func` ahead of time into `<dir>/<symbol>.o`, writes its header
/// `<dir>/<symbol>.h` (with `description`, e.g. the workload key, in a
/// comment) and the C runtime `<dir>/tessera_runtime.c`, creating `dir` if
/// needed. Each file is written under a temporary name and renamed, so an
/// error leaves no half-written file behind.
pub fn write_aot(
    func: &PrimFunc,
    symbol: &str,
    description: &str,
    dir: &Path,
    options: &CodegenOptions,
) -> Result<AotFiles, AotError> {
    if !is_c_identifier(symbol) {
        return Err(AotError::InvalidSymbol(symbol.to_string()));
    }
    let codegen_error = |source| AotError::Codegen {
        symbol: symbol.to_string(),
        source,
    };
    let object = codegen::compile_object(func, options, symbol).map_err(codegen_error)?;
    let target = codegen::object_target(options).map_err(codegen_error)?;
    let header = header_source(func, symbol, description, &target);
    std::fs::create_dir_all(dir).map_err(|source| AotError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let files = AotFiles {
        object: dir.join(format!("{symbol}.o")),
        header: dir.join(format!("{symbol}.h")),
        runtime: dir.join(RUNTIME_FILE),
    };
    write_all(&[
        (&files.object, object.as_slice()),
        (&files.header, header.as_bytes()),
        (&files.runtime, RUNTIME_SOURCE.as_bytes()),
    ])?;
    Ok(files)
}

/// Writes every file to a temporary name in its folder, then renames them
/// all; on error the temporary files are removed.
fn write_all(files: &[(&PathBuf, &[u8])]) -> Result<(), AotError> {
    let mut temps: Vec<PathBuf> = Vec::new();
    let result = (|| {
        for (path, bytes) in files {
            let temp = temp_path(path);
            temps.push(temp.clone());
            std::fs::write(&temp, bytes).map_err(|source| AotError::Io { path: temp, source })?;
        }
        for ((path, _), temp) in files.iter().zip(&temps) {
            std::fs::rename(temp, path).map_err(|source| AotError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        }
        Ok(())
    })();
    if result.is_err() {
        for temp in &temps {
            // Best effort: the file may not exist (or was renamed already).
            let _ = std::fs::remove_file(temp);
        }
    }
    result
}

/// `<dir>/.<name>.<pid>-<n>.tmp`: unique per process and call, hidden, in
/// the same folder (so the rename stays on one file system).
fn temp_path(path: &Path) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}-{n}.tmp", std::process::id()))
}

/// C keywords and names the header itself uses, which parameters must not take.
const RESERVED: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "alignas",
    "alignof",
    "nullptr",
    "static_assert",
    "thread_local",
    "typeof",
    "class",
    "delete",
    "new",
    "this",
    "template",
    "operator",
    "private",
    "protected",
    "public",
    "virtual",
    "tessera_args",
];

/// C identifiers for the parameter names: other characters become '_', a
/// leading digit or a reserved word gets a '_', and names equal up to case
/// (the `#define`s are upper case) get a numeric suffix.
fn parameter_identifiers(params: &[KernelParam]) -> Vec<String> {
    let mut taken: HashSet<String> = HashSet::new();
    params
        .iter()
        .map(|p| {
            let mut name: String = p
                .name
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
                name.insert(0, '_');
            }
            if RESERVED.contains(&name.as_str()) {
                name.push('_');
            }
            let mut unique = name.clone();
            let mut n = 1;
            while !taken.insert(unique.to_ascii_uppercase()) {
                n += 1;
                unique = format!("{name}_{n}");
            }
            unique
        })
        .collect()
}

/// The C element type of `dtype` (booleans are stored as one byte, 0 or 1).
fn c_type(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I32 => "int32_t",
        DType::I64 => "int64_t",
        DType::Bool => "uint8_t",
    }
}

/// `text` made safe inside a `/* */` comment, one line.
fn comment_text(text: &str) -> String {
    text.replace("*/", "* /")
        .replace("/*", "/ *")
        .replace(['\n', '\r'], " ")
}

/// The C header of kernel `symbol`.
fn header_source(func: &PrimFunc, symbol: &str, description: &str, target: &str) -> String {
    let params = codegen::kernel_params(func);
    let names = parameter_identifiers(&params);
    let upper = symbol.to_ascii_uppercase();
    let guard = format!("TESSERA_{upper}_H");
    let mut h = String::new();
    // `write!` into a String cannot fail.
    let _ = writeln!(
        h,
        "/* {symbol}.h: generated by tessera {}; do not edit.",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(h, " *");
    let _ = writeln!(h, " * Workload: {}", comment_text(description));
    let _ = writeln!(h, " * Kernel:   {}", comment_text(&func.name));
    let _ = writeln!(h, " * Target:   {}", comment_text(target));
    let _ = writeln!(
        h,
        " *           (the object runs only on CPUs with these ISA extensions)"
    );
    let _ = writeln!(h, " *");
    let _ = writeln!(
        h,
        " * Link: cc -O2 main.c {RUNTIME_FILE} {symbol}.o -lm -lpthread"
    );
    let _ = writeln!(
        h,
        " * Parallel loops use TESSERA_THREADS threads (default: the online CPUs)."
    );
    let _ = writeln!(
        h,
        " * Buffers are dense, row-major; inputs are read, outputs fully written. */"
    );
    let _ = writeln!(h, "#ifndef {guard}");
    let _ = writeln!(h, "#define {guard}\n");
    let _ = writeln!(h, "#include <stdint.h>\n");
    let _ = writeln!(h, "#ifdef __cplusplus\nextern \"C\" {{\n#endif\n");
    for (index, (param, name)) in params.iter().zip(&names).enumerate() {
        let role = if index < func.num_inputs {
            "input"
        } else {
            "output"
        };
        let dims: String = param.shape.iter().map(|d| format!("[{d}]")).collect();
        let original = if *name == param.name {
            String::new()
        } else {
            format!(" (tensor '{}')", comment_text(&param.name))
        };
        let _ = writeln!(
            h,
            "/* {role} {index}: {} {name}{dims}{original} */",
            c_type(param.dtype)
        );
        let prefix = format!("{upper}_{}", name.to_ascii_uppercase());
        let _ = writeln!(h, "#define {prefix}_NDIM {}", param.shape.len());
        for (axis, dim) in param.shape.iter().enumerate() {
            let _ = writeln!(h, "#define {prefix}_DIM{axis} {dim}");
        }
        let size: usize = param.shape.iter().product();
        let _ = writeln!(h, "#define {prefix}_SIZE {size}\n");
    }
    let _ = writeln!(
        h,
        "/* The entry point: args[i] points to parameter i (inputs, then outputs). */"
    );
    let _ = writeln!(h, "void {symbol}(void **args);\n");
    let typed: Vec<String> = params
        .iter()
        .zip(&names)
        .enumerate()
        .map(|(index, (param, name))| {
            let constness = if index < func.num_inputs {
                "const "
            } else {
                ""
            };
            format!("{constness}{} *{name}", c_type(param.dtype))
        })
        .collect();
    let casts: Vec<String> = names.iter().map(|n| format!("(void *){n}")).collect();
    let _ = writeln!(h, "/* Typed call: the same, one pointer per parameter. */");
    let _ = writeln!(
        h,
        "static inline void {symbol}_call({}) {{",
        if typed.is_empty() {
            "void".to_string()
        } else {
            typed.join(", ")
        }
    );
    let _ = writeln!(
        h,
        "    void *tessera_args[{}] = {{{}}};",
        casts.len().max(1),
        if casts.is_empty() {
            "0".to_string()
        } else {
            casts.join(", ")
        }
    );
    let _ = writeln!(h, "    {symbol}(tessera_args);\n}}\n");
    h.push_str(RUNTIME_DECLARATIONS);
    let _ = writeln!(h, "\n#ifdef __cplusplus\n}}\n#endif\n");
    let _ = writeln!(h, "#endif /* {guard} */");
    h
}

/// Declarations of the runtime's own API, shared by every kernel header.
const RUNTIME_DECLARATIONS: &str = "\
#ifndef TESSERA_RUNTIME_API
#define TESSERA_RUNTIME_API
/* From tessera_runtime.c: threads used by parallel loops. */
int tessera_num_threads(void);
void tessera_set_num_threads(int threads);
#endif
";

/// The C runtime: every symbol kernel objects import
/// ([`codegen::RUNTIME_IMPORTS`]) plus the thread-count API.
const RUNTIME_SOURCE: &str = r#"/* tessera_runtime.c: the runtime of tessera's ahead-of-time kernels;
 * generated by tessera, do not edit (it is rewritten with every kernel).
 *
 * Kernel objects import these symbols; compile this file once per program:
 *   cc -O2 -c tessera_runtime.c    and link with -lm -lpthread.
 *
 * - tessera_parallel_for: runs an outlined parallel loop body on a pool of
 *   pthreads, one contiguous chunk of iterations per thread (as tessera's
 *   Rust runtime does). Threads: tessera_set_num_threads(n), else the
 *   environment variable TESSERA_THREADS, else the online CPUs.
 * - tessera_alloc / tessera_free: 64-byte aligned heap blocks for buffers too
 *   large for the stack (tessera_alloc returns NULL when out of memory).
 * - tessera_*_f64, tessera_pow_f32: math the kernels call (libm).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

/* An outlined loop body: iterations begin..end, with the kernel's buffer
 * pointers and captured loop values. */
typedef void (*tessera_loop_body)(void *const *ptrs, const int64_t *values,
                                  int64_t begin, int64_t end);

int tessera_num_threads(void);
void tessera_set_num_threads(int threads);
void tessera_parallel_for(tessera_loop_body body, void *const *ptrs,
                          const int64_t *values, int64_t extent);
void *tessera_alloc(int64_t bytes);
void tessera_free(void *ptr);
double tessera_exp_f64(double x);
double tessera_log_f64(double x);
double tessera_tanh_f64(double x);
double tessera_sigmoid_f64(double x);
double tessera_erf_f64(double x);
double tessera_pow_f64(double x, double y);
float tessera_pow_f32(float x, float y);

/* ---- thread count ---- */

#define TESSERA_MAX_THREADS 1024

static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static int thread_count; /* 0: not decided yet */

/* TESSERA_THREADS if it is a positive integer, else the online CPUs. */
static int default_thread_count(void) {
  long n = 0;
  const char *env = getenv("TESSERA_THREADS");
  if (env != NULL && *env != '\0') {
    char *end = NULL;
    long v = strtol(env, &end, 10);
    if (end != NULL && *end == '\0' && v > 0) n = v;
  }
#ifdef _SC_NPROCESSORS_ONLN
  if (n <= 0) n = sysconf(_SC_NPROCESSORS_ONLN);
#endif
  if (n <= 0) n = 1;
  if (n > TESSERA_MAX_THREADS) n = TESSERA_MAX_THREADS;
  return (int)n;
}

int tessera_num_threads(void) {
  pthread_mutex_lock(&threads_lock);
  if (thread_count == 0) thread_count = default_thread_count();
  int n = thread_count;
  pthread_mutex_unlock(&threads_lock);
  return n;
}

void tessera_set_num_threads(int threads) {
  if (threads < 1) threads = 1;
  if (threads > TESSERA_MAX_THREADS) threads = TESSERA_MAX_THREADS;
  pthread_mutex_lock(&threads_lock);
  thread_count = threads;
  pthread_mutex_unlock(&threads_lock);
}

/* ---- the pool: workers wait for a job, run their chunk, report back ---- */

static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t job_ready = PTHREAD_COND_INITIALIZER;
static pthread_cond_t job_done = PTHREAD_COND_INITIALIZER;
static int workers;              /* started so far (they never exit) */
static unsigned long generation; /* bumped for each job */
static struct {
  tessera_loop_body body;
  void *const *ptrs;
  const int64_t *values;
  int64_t extent, chunk;
  int threads; /* caller (chunk 0) + workers 1..threads-1 */
} job;
static int pending; /* workers of the current job still running */

/* A worker started after some jobs first sees the last one, which it skips:
 * that job only used the workers that existed then, all below its index. */
static void *worker_main(void *arg) {
  int index = (int)(intptr_t)arg; /* this worker runs chunk `index` */
  unsigned long seen = 0;
  pthread_mutex_lock(&pool_lock);
  for (;;) {
    while (generation == seen) pthread_cond_wait(&job_ready, &pool_lock);
    seen = generation;
    if (index >= job.threads) continue;
    int64_t begin = index * job.chunk;
    int64_t end = begin + job.chunk < job.extent ? begin + job.chunk : job.extent;
    tessera_loop_body body = job.body;
    void *const *ptrs = job.ptrs;
    const int64_t *values = job.values;
    pthread_mutex_unlock(&pool_lock);
    if (begin < end) body(ptrs, values, begin, end);
    pthread_mutex_lock(&pool_lock);
    if (--pending == 0) pthread_cond_signal(&job_done);
  }
  return NULL;
}

/* Starts workers until there are `wanted` (fewer if pthread_create fails);
 * returns how many there are. Called with job_lock held. */
static int grow_pool(int wanted) {
  while (workers < wanted) {
    pthread_t thread;
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) break;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Workers start at index 1 (the caller runs chunk 0). They hold
     * pool_lock only between jobs, so starting one while idle is safe. */
    int ok = pthread_create(&thread, &attr, worker_main,
                            (void *)(intptr_t)(workers + 1)) == 0;
    pthread_attr_destroy(&attr);
    if (!ok) break;
    pthread_mutex_lock(&pool_lock);
    workers++;
    pthread_mutex_unlock(&pool_lock);
  }
  return workers;
}

void tessera_parallel_for(tessera_loop_body body, void *const *ptrs,
                          const int64_t *values, int64_t extent) {
  int64_t threads = tessera_num_threads();
  if (threads > extent) threads = extent;
  if (threads <= 1) {
    if (extent > 0) body(ptrs, values, 0, extent);
    return;
  }
  pthread_mutex_lock(&job_lock);
  int available = grow_pool((int)threads - 1) + 1;
  if (threads > available) threads = available;
  int64_t chunk = (extent + threads - 1) / threads;
  pthread_mutex_lock(&pool_lock);
  job.body = body;
  job.ptrs = ptrs;
  job.values = values;
  job.extent = extent;
  job.chunk = chunk;
  job.threads = (int)threads;
  pending = (int)threads - 1;
  generation++;
  pthread_cond_broadcast(&job_ready);
  pthread_mutex_unlock(&pool_lock);
  body(ptrs, values, 0, chunk < extent ? chunk : extent);
  pthread_mutex_lock(&pool_lock);
  while (pending > 0) pthread_cond_wait(&job_done, &pool_lock);
  pthread_mutex_unlock(&pool_lock);
  pthread_mutex_unlock(&job_lock);
}

/* ---- heap blocks ---- */

void *tessera_alloc(int64_t bytes) {
  void *block = NULL;
  size_t size = bytes > 0 ? (size_t)bytes : 1;
  if (posix_memalign(&block, 64, size) != 0) return NULL;
  return block;
}

void tessera_free(void *ptr) { free(ptr); }

/* ---- math ---- */

double tessera_exp_f64(double x) { return exp(x); }
double tessera_log_f64(double x) { return log(x); }
double tessera_tanh_f64(double x) { return tanh(x); }
/* Accurate in both tails: e^x / (1 + e^x) for x < 0. */
double tessera_sigmoid_f64(double x) {
  if (x < 0.0) {
    double e = exp(x);
    return e / (1.0 + e);
  }
  return 1.0 / (1.0 + exp(-x));
}
double tessera_erf_f64(double x) { return erf(x); }
double tessera_pow_f64(double x, double y) { return pow(x, y); }
float tessera_pow_f32(float x, float y) { return powf(x, y); }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn param(name: &str) -> KernelParam {
        KernelParam {
            name: name.into(),
            shape: vec![2, 3],
            dtype: DType::F32,
        }
    }

    #[test]
    fn parameter_names_become_unique_c_identifiers() {
        let params: Vec<KernelParam> = ["A", "a", "x.local", "2d", "float", "", "a"]
            .iter()
            .map(|n| param(n))
            .collect();
        let names = parameter_identifiers(&params);
        assert_eq!(names, ["A", "a_2", "x_local", "_2d", "float_", "_", "a_3"]);
        assert!(names.iter().all(|n| is_c_identifier(n)));
    }

    #[test]
    fn comments_cannot_be_closed_early() {
        assert_eq!(comment_text("a */ b\nc /* d"), "a * / b c / * d");
    }

    /// Whether the runtime defines (not only declares) function `name`.
    fn defines(name: &str) -> bool {
        RUNTIME_SOURCE
            .match_indices(&format!("{name}("))
            .filter(|(at, _)| {
                // A whole name: not the tail of a longer identifier.
                !RUNTIME_SOURCE[..*at].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            })
            .any(|(at, _)| {
                // A definition's parameter list is followed by its body.
                let rest = &RUNTIME_SOURCE[at..];
                rest.find(['{', ';'])
                    .is_some_and(|end| rest.as_bytes()[end] == b'{')
            })
    }

    #[test]
    fn runtime_defines_every_import() {
        for symbol in codegen::RUNTIME_IMPORTS {
            assert!(defines(symbol), "{RUNTIME_FILE} lacks {symbol}");
        }
        for api in ["tessera_num_threads", "tessera_set_num_threads"] {
            assert!(defines(api), "{RUNTIME_FILE} lacks {api}");
        }
        assert!(!defines("tessera_missing"));
    }

    #[test]
    fn invalid_symbols_are_rejected_before_writing() {
        let dir = std::env::temp_dir().join(format!("tessera-aot-unit-{}", std::process::id()));
        let func = PrimFunc {
            name: "k".into(),
            buffers: Vec::new(),
            params: Vec::new(),
            num_inputs: 0,
            body: crate::tir::Stmt::Seq(Vec::new()),
        };
        let err = write_aot(&func, "bad-name", "", &dir, &CodegenOptions::default())
            .expect_err("a dash is not a C identifier");
        assert!(matches!(err, AotError::InvalidSymbol(_)), "{err}");
        assert!(!dir.exists(), "nothing may be written");
    }
}
