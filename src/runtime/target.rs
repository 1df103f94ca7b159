//! The machine code is generated for: a [`Target`] value (micro-kernel ISA
//! and its cap, vector lanes, cores, caches), passed to sketch generation,
//! code generation and deployment instead of process-wide ISA state.

use std::sync::Once;

use serde::{Deserialize, Serialize};

use super::device::{DeviceDescription, host_device};
use super::micro_kernels::{Isa, MicroKernel, all_kernels};

/// The environment variable that caps the micro-kernel ISA
/// (`generic|sse|avx2|avx512`), read by [`Target::from_env`].
pub const ISA_ENV: &str = "TESSERA_ISA";

/// What kernels are generated for: the host CPU as the device fingerprint
/// describes it, with the micro-kernel instruction set optionally capped
/// (to force a narrower kernel or the fallbacks).
///
/// Built by [`Target::host`] (no cap), [`Target::from_env`] (`TESSERA_ISA`)
/// and narrowed by [`Target::with_isa_cap`]. A target crosses a process
/// boundary as its caps alone: deserialising one describes the receiving
/// host, so it never allows an ISA that host's CPU lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "TargetCaps", into = "TargetCaps")]
pub struct Target {
    cpu_isa: Isa,
    env_cap: Option<Isa>,
    explicit_cap: Option<Isa>,
    cores: usize,
    /// Bytes of the data (or unified) cache of levels 1, 2 and 3.
    data_caches: [Option<u64>; 3],
}

/// The serialised form of a [`Target`]: what capped its ISA.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetCaps {
    env_cap: Option<Isa>,
    explicit_cap: Option<Isa>,
}

impl From<TargetCaps> for Target {
    fn from(caps: TargetCaps) -> Target {
        Target {
            env_cap: caps.env_cap,
            explicit_cap: caps.explicit_cap,
            ..Target::host()
        }
    }
}

impl From<Target> for TargetCaps {
    fn from(target: Target) -> TargetCaps {
        TargetCaps {
            env_cap: target.env_cap,
            explicit_cap: target.explicit_cap,
        }
    }
}

impl Target {
    /// This machine, uncapped: the widest ISA its CPU runs, its cores and
    /// caches (from [`host_device`], detected once per process).
    pub fn host() -> Target {
        Target::of_device(host_device())
    }

    /// The target of `device`, uncapped. Private: every target describes
    /// this host's CPU, which is what makes calling the kernels it allows
    /// safe.
    fn of_device(device: &DeviceDescription) -> Target {
        let data_cache = |level: u8| {
            device
                .caches
                .iter()
                .find(|c| c.level == level && c.kind != "instruction")
                .map(|c| c.size_bytes)
        };
        Target {
            cpu_isa: kernel_isa_of(device),
            env_cap: None,
            explicit_cap: None,
            cores: device.cores,
            data_caches: [data_cache(1), data_cache(2), data_cache(3)],
        }
    }

    /// This machine, capped by `TESSERA_ISA` when it is set: what the CLI
    /// and the convenience defaults build. An unknown value is reported on
    /// stderr (once per process) and ignored.
    pub fn from_env() -> Target {
        let target = Target::host();
        let Ok(value) = std::env::var(ISA_ENV) else {
            return target;
        };
        if value.trim().is_empty() {
            return target;
        }
        match Isa::from_name(&value) {
            Some(isa) => Target {
                env_cap: Some(isa),
                ..target
            },
            None => {
                static WARNED: Once = Once::new();
                WARNED.call_once(|| {
                    eprintln!(
                        "warning: {ISA_ENV}={value:?} is not one of generic|sse|avx2|avx512; ignored"
                    )
                });
                target
            }
        }
    }

    /// This target with micro-kernels capped at `isa` (on top of any cap it
    /// has: the narrower applies).
    pub fn with_isa_cap(self, isa: Isa) -> Target {
        Target {
            explicit_cap: Some(self.explicit_cap.map_or(isa, |cap| cap.min(isa))),
            ..self
        }
    }

    /// The widest ISA micro-kernels may use: what the CPU runs, capped.
    pub fn isa(&self) -> Isa {
        self.cap().map_or(self.cpu_isa, |cap| self.cpu_isa.min(cap))
    }

    /// The widest ISA the CPU runs, ignoring any cap.
    pub fn cpu_isa(&self) -> Isa {
        self.cpu_isa
    }

    /// The cap in force: the narrower of `TESSERA_ISA` and
    /// [`with_isa_cap`](Target::with_isa_cap), or `None` when neither applies.
    pub fn cap(&self) -> Option<Isa> {
        match (self.env_cap, self.explicit_cap) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What capped the ISA, in words, for error messages:
    /// `TESSERA_ISA=sse`, `with_isa_cap(avx2)`, both, or `none`.
    pub fn cap_description(&self) -> String {
        let parts: Vec<String> = [
            self.env_cap.map(|isa| format!("{ISA_ENV}={isa}")),
            self.explicit_cap.map(|isa| format!("with_isa_cap({isa})")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    }

    /// f32 lanes of one vector register of [`isa`](Target::isa).
    pub fn lanes(&self) -> usize {
        self.isa().lanes()
    }

    /// Threads the machine runs in parallel.
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// Bytes of the data (or unified) cache of `level` (1, 2 or 3), when
    /// the system says.
    pub fn data_cache_bytes(&self, level: u8) -> Option<u64> {
        let index = usize::from(level).checked_sub(1)?;
        self.data_caches.get(index).copied().flatten()
    }

    /// Whether code for this target may call `kernel` (its ISA is at most
    /// [`isa`](Target::isa)).
    pub fn can_run(&self, kernel: &MicroKernel) -> bool {
        kernel.isa <= self.isa()
    }

    /// The compiled-in micro-kernels this target may call, narrowest ISA first.
    pub fn kernels(&self) -> Vec<&'static MicroKernel> {
        all_kernels().iter().filter(|k| self.can_run(k)).collect()
    }
}

/// The widest micro-kernel ISA a device's CPU runs, from the code
/// generator's ISA flags the fingerprint lists (x86-64 always has SSE2).
fn kernel_isa_of(device: &DeviceDescription) -> Isa {
    if device.arch != "x86_64" || !cfg!(target_arch = "x86_64") {
        return Isa::Generic;
    }
    let has = |flag: &str| device.features.iter().any(|f| f == flag);
    if has("has_avx512f") {
        Isa::Avx512
    } else if has("has_avx2") && has("has_fma") {
        Isa::Avx2Fma
    } else {
        Isa::Sse
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::CacheLevel;

    fn device(features: &[&str]) -> DeviceDescription {
        let cache = |level, kind: &str, size_bytes| CacheLevel {
            level,
            kind: kind.to_string(),
            size_bytes,
        };
        DeviceDescription {
            arch: "x86_64".to_string(),
            vendor: "GenuineIntel".to_string(),
            model: "test".to_string(),
            features: features.iter().map(|f| f.to_string()).collect(),
            cores: 4,
            caches: vec![
                cache(1, "instruction", 32 << 10),
                cache(1, "data", 48 << 10),
                cache(2, "unified", 2 << 20),
            ],
        }
    }

    #[test]
    fn the_isa_comes_from_the_fingerprint_flags() {
        if !cfg!(target_arch = "x86_64") {
            eprintln!("skipped: the x86-64 kernels are not compiled in here");
            return;
        }
        let isa = |flags: &[&str]| Target::of_device(&device(flags)).isa();
        assert_eq!(isa(&["has_avx2", "has_avx512f", "has_fma"]), Isa::Avx512);
        assert_eq!(isa(&["has_avx2", "has_fma"]), Isa::Avx2Fma);
        assert_eq!(isa(&["has_avx2"]), Isa::Sse, "AVX2 kernels need FMA");
        assert_eq!(isa(&[]), Isa::Sse);
        let mut arm = device(&["has_lse"]);
        arm.arch = "aarch64".to_string();
        assert_eq!(Target::of_device(&arm).isa(), Isa::Generic);
    }

    #[test]
    fn cores_and_data_caches_come_from_the_fingerprint() {
        let target = Target::of_device(&device(&[]));
        assert_eq!(target.cores(), 4);
        assert_eq!(target.data_cache_bytes(1), Some(48 << 10));
        assert_eq!(target.data_cache_bytes(2), Some(2 << 20));
        assert_eq!(target.data_cache_bytes(3), None);
        assert_eq!(target.data_cache_bytes(0), None);
    }

    #[test]
    fn caps_narrow_and_say_where_they_came_from() {
        if !cfg!(target_arch = "x86_64") {
            eprintln!("skipped: the x86-64 kernels are not compiled in here");
            return;
        }
        let wide = Target::of_device(&device(&["has_avx2", "has_avx512f", "has_fma"]));
        assert_eq!(wide.cap(), None);
        assert_eq!(wide.cap_description(), "none");
        let sse = wide.with_isa_cap(Isa::Sse);
        assert_eq!(
            (sse.isa(), sse.cpu_isa(), sse.lanes()),
            (Isa::Sse, Isa::Avx512, 4)
        );
        assert_eq!(sse.cap_description(), "with_isa_cap(sse)");
        assert_eq!(
            sse.with_isa_cap(Isa::Avx2Fma).isa(),
            Isa::Sse,
            "caps only narrow"
        );
        let both = Target {
            env_cap: Some(Isa::Avx2Fma),
            ..sse
        };
        assert_eq!(both.isa(), Isa::Sse);
        assert_eq!(
            both.cap_description(),
            "TESSERA_ISA=avx2, with_isa_cap(sse)"
        );
        assert!(sse.kernels().iter().all(|k| k.isa <= Isa::Sse));
        assert!(sse.kernels().iter().all(|k| sse.can_run(k)));
    }

    #[test]
    fn a_target_crosses_processes_as_its_caps() {
        let target = Target::host().with_isa_cap(Isa::Sse);
        let text = serde_json::to_string(&target).expect("serialize");
        assert_eq!(text, r#"{"env_cap":null,"explicit_cap":"Sse"}"#);
        let back: Target = serde_json::from_str(&text).expect("deserialize");
        assert_eq!(back, target);
        assert!(serde_json::from_str::<Target>(r#"{"cpu_isa":"Avx512"}"#).is_err());
    }
}
