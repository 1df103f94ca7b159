//! The table of compiled micro-kernels, host detection and the ISA cap.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

use super::{Isa, MicroKernel, generic};

/// Every kernel compiled into this build, narrowest ISA first.
pub fn all_kernels() -> &'static [MicroKernel] {
    static ALL: OnceLock<Vec<MicroKernel>> = OnceLock::new();
    ALL.get_or_init(|| [generic::kernels(), simd_kernels()].concat())
}

/// The vector kernels of this architecture, narrowest ISA first.
#[cfg(target_arch = "x86_64")]
fn simd_kernels() -> Vec<MicroKernel> {
    [
        super::sse::kernels(),
        super::avx2::kernels(),
        super::avx512::kernels(),
    ]
    .concat()
}

/// No vector kernels off x86-64: the scalar one serves.
#[cfg(not(target_arch = "x86_64"))]
fn simd_kernels() -> Vec<MicroKernel> {
    Vec::new()
}

/// The widest ISA the CPU supports (ignoring any cap).
pub(super) fn cpu_isa() -> Isa {
    static CPU: OnceLock<Isa> = OnceLock::new();
    *CPU.get_or_init(detect)
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Isa {
    if std::arch::is_x86_feature_detected!("avx512f") {
        Isa::Avx512
    } else if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
    {
        Isa::Avx2Fma
    } else if std::arch::is_x86_feature_detected!("sse2") {
        Isa::Sse
    } else {
        Isa::Generic
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Isa {
    Isa::Generic
}

/// `TESSERA_ISA`, read once. An unknown value is reported on stderr (once)
/// and ignored.
fn env_cap() -> Option<Isa> {
    static ENV: OnceLock<Option<Isa>> = OnceLock::new();
    *ENV.get_or_init(|| {
        let value = std::env::var("TESSERA_ISA").ok()?;
        if value.trim().is_empty() {
            return None;
        }
        let isa = Isa::from_name(&value);
        if isa.is_none() {
            eprintln!(
                "warning: TESSERA_ISA={value:?} is not one of generic|sse|avx2|avx512; ignored"
            );
        }
        isa
    })
}

/// The programmatic cap: 0 = none, else `Isa as u8 + 1`.
static CAP: AtomicU8 = AtomicU8::new(0);

fn encode(cap: Option<Isa>) -> u8 {
    cap.map_or(0, |isa| isa as u8 + 1)
}

fn decode(code: u8) -> Option<Isa> {
    code.checked_sub(1)
        .and_then(|i| Isa::ALL.get(usize::from(i)).copied())
}

/// Caps [`host_isa`] at `cap` for the whole process (`None` lifts it), on
/// top of `TESSERA_ISA`: the narrower of the two applies. Tests use it to
/// force the fallback kernels; it is a process-global setting, so tests that
/// depend on it must serialise themselves.
pub fn set_isa_cap(cap: Option<Isa>) {
    CAP.store(encode(cap), Ordering::SeqCst);
}

/// The cap in force: the narrower of `TESSERA_ISA` and [`set_isa_cap`], or
/// `None` when neither is set.
pub fn isa_cap() -> Option<Isa> {
    match (env_cap(), decode(CAP.load(Ordering::SeqCst))) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The cap, in words, for error messages.
pub(super) fn cap_description() -> String {
    let mut parts = Vec::new();
    if let Some(isa) = env_cap() {
        parts.push(format!("TESSERA_ISA={isa}"));
    }
    if let Some(isa) = decode(CAP.load(Ordering::SeqCst)) {
        parts.push(format!("set_isa_cap({isa})"));
    }
    if parts.is_empty() {
        "none".to_string()
    } else {
        parts.join(", ")
    }
}

/// The widest ISA kernels may use here: what the CPU supports, capped by
/// `TESSERA_ISA` (`generic|sse|avx2|avx512`, read once) and [`set_isa_cap`].
pub fn host_isa() -> Isa {
    let cpu = cpu_isa();
    isa_cap().map_or(cpu, |cap| cpu.min(cap))
}

/// Whether `k` may run on this host now (its ISA is at most [`host_isa`]).
pub fn is_available(k: &MicroKernel) -> bool {
    k.isa <= host_isa()
}

/// The kernels that may run on this host now, narrowest ISA first.
pub fn available_kernels() -> Vec<&'static MicroKernel> {
    let host = host_isa();
    all_kernels().iter().filter(|k| k.isa <= host).collect()
}

/// The compiled-in kernel called `name` (e.g. `avx512_6x32`), whether or
/// not this host may run it.
pub fn find(name: &str) -> Option<&'static MicroKernel> {
    all_kernels().iter().find(|k| k.name == name)
}
