//! Which micro-kernel ISAs a test covers on this host, said out loud. Every
//! test that would leave out an ISA the host (or `TESSERA_ISA`) lacks goes
//! through [`isa_coverage`]: it prints what runs and what is skipped and why
//! (`micro-kernels covered: avx2 sse generic; skipped avx512: host lacks
//! avx512f`), and fails the test when `TESSERA_REQUIRE_ISA` names an ISA
//! that does not run.

use std::fmt;

use tessera::runtime::Target;
use tessera::runtime::micro_kernels::{self, Isa, MicroKernel};

/// The environment variable naming the ISAs a test run must cover,
/// comma-separated, in `TESSERA_ISA`'s names (`avx512,avx2,sse`); `.ci/run`
/// sets it to what the CI machine's CPU has.
pub const REQUIRE_ISA_ENV: &str = "TESSERA_REQUIRE_ISA";

/// The micro-kernel ISAs a target covers (widest first) and the ones it
/// skips, each with its reason.
#[derive(Clone, Debug)]
pub struct IsaCoverage {
    target: Target,
    covered: Vec<Isa>,
    skipped: Vec<(Isa, String)>,
}

impl IsaCoverage {
    /// What `target` covers: every ISA up to [`Target::isa`]; the others
    /// are skipped because the CPU lacks them or a cap forbids them.
    pub fn of(target: &Target) -> IsaCoverage {
        let (mut covered, mut skipped) = (Vec::new(), Vec::new());
        for isa in Isa::ALL.into_iter().rev() {
            if isa <= target.isa() {
                covered.push(isa);
            } else if isa <= target.cpu_isa() {
                skipped.push((isa, format!("capped by {}", target.cap_description())));
            } else {
                skipped.push((isa, format!("host lacks {}", cpu_feature(isa))));
            }
        }
        IsaCoverage {
            target: *target,
            covered,
            skipped,
        }
    }

    /// The ISAs covered, widest first.
    pub fn covered(&self) -> &[Isa] {
        &self.covered
    }

    /// Whether `isa` is covered.
    pub fn covers(&self, isa: Isa) -> bool {
        self.covered.contains(&isa)
    }

    /// The compiled-in micro-kernels of the covered ISAs, narrowest first.
    pub fn kernels(&self) -> Vec<&'static MicroKernel> {
        micro_kernels::all_kernels()
            .iter()
            .filter(|k| self.covers(k.isa) && self.target.can_run(k))
            .collect()
    }

    /// The first covered kernel of an ISA wider than `isa`, or `None` after
    /// printing why the test that asked skips.
    pub fn kernel_wider_than(&self, isa: Isa) -> Option<&'static MicroKernel> {
        let wide = self.kernels().into_iter().find(|k| k.isa > isa);
        if wide.is_none() {
            eprintln!(
                "{}: skipped: no micro-kernel wider than {isa} ({self})",
                test_name()
            );
        }
        wide
    }

    /// Panics, naming the test and this coverage, unless every ISA in
    /// `required` (the value of [`REQUIRE_ISA_ENV`]) is covered.
    pub fn check_required(&self, required: &str) {
        for name in required.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let Some(isa) = Isa::from_name(name) else {
                panic!(
                    "{}: {REQUIRE_ISA_ENV}={required:?}: {name:?} is not one of \
                     generic|sse|avx2|avx512",
                    test_name()
                );
            };
            assert!(
                self.covers(isa),
                "{}: {REQUIRE_ISA_ENV}={required} requires {isa}, which this run does not \
                 cover ({self})",
                test_name()
            );
        }
    }
}

/// `micro-kernels covered: avx2 sse generic; skipped avx512: host lacks avx512f`.
impl fmt::Display for IsaCoverage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "micro-kernels covered:")?;
        for isa in &self.covered {
            write!(f, " {isa}")?;
        }
        for (isa, reason) in &self.skipped {
            write!(f, "; skipped {isa}: {reason}")?;
        }
        Ok(())
    }
}

/// The CPU feature an ISA's kernels need, as `/proc/cpuinfo` names it.
fn cpu_feature(isa: Isa) -> &'static str {
    match isa {
        Isa::Avx512 => "avx512f",
        Isa::Avx2Fma => "avx2+fma",
        Isa::Sse => "x86-64 (sse2)",
        Isa::Generic => "nothing",
    }
}

/// The running test's name (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string()
}

/// The coverage of `target`, printed for the running test and checked
/// against `TESSERA_REQUIRE_ISA` (a required ISA not covered fails the test
/// with the coverage in the message).
pub fn isa_coverage(target: &Target) -> IsaCoverage {
    let coverage = IsaCoverage::of(target);
    eprintln!("{}: {coverage}", test_name());
    if let Ok(required) = std::env::var(REQUIRE_ISA_ENV) {
        coverage.check_required(&required);
    }
    coverage
}
