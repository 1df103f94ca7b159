//! Ahead-of-time kernels: a kernel compiled into a relocatable object
//! file, with a C header and a small C runtime, so that a C (or any
//! C-ABI) program links and calls the tuned kernel without a JIT.
//!
//! [`write_aot`] writes three files into a folder:
//!
//! - `<symbol>.o`: the kernel ([`codegen::compile_object`]), exporting
//!   `void <symbol>(void **args)`;
//! - `<symbol>.h`: the parameters' dimensions as `#define`s, the raw entry
//!   point and a typed wrapper `<symbol>_call(...)` (`header.rs`);
//! - `tessera_runtime.c`: the functions kernels import (a pthread pool for
//!   parallel loops, aligned heap blocks, libm math), the same for every
//!   kernel (the file `tessera_runtime.c` beside this one, copied as is);
//! - `tessera_kernels.c`: the GEMM micro-kernels tensorized kernels call,
//!   one C function per kernel of tessera's registry with the same ABI
//!   (`tessera_kernels.c` beside this one, then the registry's list), each
//!   compiled for its instruction set and checking the CPU has it before
//!   its first call.
//!
//! [`compile_deployed`] does this for every artifact `tessera deploy --aot`
//! deployed, into `<device>/aot/` (in `compile_deployed.rs`).
//!
//! Build a program with `cc -O2 main.c tessera_runtime.c tessera_kernels.c
//! <symbol>.o -lm -lpthread`. The object uses every ISA extension of the machine that
//! compiled it (named in the header), so it runs on CPUs that have them.

mod compile_deployed;
mod header;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use thiserror::Error;

use crate::codegen::{self, CodegenError, CodegenOptions, is_c_identifier};
use crate::runtime::micro_kernels::{self, Isa};
use crate::tir::PrimFunc;

pub use compile_deployed::{AOT_DIR, AotWorkload, aot_symbol, compile_deployed};
use header::header_source;

/// The name of the C runtime file written next to every kernel.
pub const RUNTIME_FILE: &str = "tessera_runtime.c";

/// The name of the C micro-kernel file written next to every kernel.
pub const KERNELS_FILE: &str = "tessera_kernels.c";

/// The files [`write_aot`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AotFiles {
    /// The relocatable object file, `<dir>/<symbol>.o`.
    pub object: PathBuf,
    /// The C header, `<dir>/<symbol>.h`.
    pub header: PathBuf,
    /// The C runtime, `<dir>/tessera_runtime.c`.
    pub runtime: PathBuf,
    /// The C micro-kernels, `<dir>/tessera_kernels.c`.
    pub kernels: PathBuf,
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
/// comment), the C runtime `<dir>/tessera_runtime.c` and the C
/// micro-kernels `<dir>/tessera_kernels.c`, creating `dir` if
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
        kernels: dir.join(KERNELS_FILE),
    };
    write_all(&[
        (&files.object, object.as_slice()),
        (&files.header, header.as_bytes()),
        (&files.runtime, RUNTIME_SOURCE.as_bytes()),
        (&files.kernels, kernels_source().as_bytes()),
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

/// The C runtime: every symbol kernel objects import
/// ([`codegen::RUNTIME_IMPORTS`]) plus the thread-count API.
const RUNTIME_SOURCE: &str = include_str!("tessera_runtime.c");

/// The C micro-kernels: the shared part, then one definition per kernel of
/// the registry (`tessera_micro_kernel_<name>`, the symbol JIT code and
/// objects call), the vector ones on x86-64 only.
pub fn kernels_source() -> String {
    let mut source = include_str!("tessera_kernels.c").to_string();
    for kernel in micro_kernels::all_kernels() {
        let (mr, nr, name) = (kernel.mr, kernel.nr, kernel.name);
        let line = match kernel.isa {
            Isa::Generic => format!("TESSERA_PORTABLE_KERNEL({name}, {mr}, {nr})\n"),
            Isa::Sse => {
                format!("#ifdef TESSERA_X86_64\nTESSERA_SSE_KERNEL({name}, {mr}, {nr})\n#endif\n")
            }
            Isa::Avx2Fma => {
                format!("#ifdef TESSERA_X86_64\nTESSERA_AVX2_KERNEL({name}, {mr}, {nr})\n#endif\n")
            }
            Isa::Avx512 => {
                format!(
                    "#ifdef TESSERA_X86_64\nTESSERA_AVX512_KERNEL({name}, {mr}, {nr})\n#endif\n"
                )
            }
        };
        source.push_str(&line);
    }
    source
}

#[cfg(test)]
mod tests {
    use super::*;

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
