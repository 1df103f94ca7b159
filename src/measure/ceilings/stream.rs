//! The streaming loops the bandwidth ceilings time, over f32 buffers of a
//! chosen size: a read (`x` loaded), a read+write (`y[i] = x[i]·a + b`) and
//! a triad (`z[i] = x[i]·a + y[i]`, two reads and a write), at the widest
//! vector width the CPU has. Three mixes, because a cache's load and store
//! ports cap each mix differently and a ceiling must bound every kernel.
//!
//! On x86-64 with AVX2 (or AVX-512F) the loops are inline assembly, so that
//! a debug build measures what a release build does; elsewhere they are
//! plain Rust loops (slower in a debug build).

use crate::runtime::micro_kernels::Isa;

/// A streaming access pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// Loads of `x`.
    Read,
    /// `y[i] = x[i]·a + b`.
    ReadWrite,
    /// `z[i] = x[i]·a + y[i]`.
    Triad,
}

impl Pattern {
    /// Every pattern.
    pub const ALL: [Pattern; 3] = [Pattern::Read, Pattern::ReadWrite, Pattern::Triad];

    /// `read`, `read_write`, `triad`.
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Read => "read",
            Pattern::ReadWrite => "read_write",
            Pattern::Triad => "triad",
        }
    }

    /// Arrays it touches (each read or written once per element).
    pub fn arrays(self) -> usize {
        match self {
            Pattern::Read => 1,
            Pattern::ReadWrite => 2,
            Pattern::Triad => 3,
        }
    }
}

/// Elements of every array are a multiple of this (8 vectors of 16 lanes:
/// one loop iteration at the widest width).
const BLOCK: usize = 128;

/// The buffers of one thread's streams and the loops that run over them.
pub struct Streams {
    /// Three arrays of `len` f32 each, 64-byte aligned, inside `storage`.
    storage: Vec<f32>,
    offset: usize,
    len: usize,
    wide: Option<Isa>,
}

impl Streams {
    /// Buffers for streams that touch about `bytes` bytes in all (the three
    /// arrays of a triad together), at least one block each.
    pub fn new(bytes: u64) -> Streams {
        let per_array = (bytes as usize / 3 / 4 / BLOCK).max(1) * BLOCK;
        let storage = vec![1.0f32; 3 * per_array + 16];
        let offset = storage.as_ptr().align_offset(64).min(16);
        Streams {
            storage,
            offset,
            len: per_array,
            wide: wide_isa(),
        }
    }

    /// The ISA of the loops, or `None` for the portable ones.
    pub fn isa(&self) -> Option<Isa> {
        self.wide
    }

    /// Bytes one pass of `pattern` moves (each array read or written once).
    pub fn bytes_per_pass(&self, pattern: Pattern) -> f64 {
        (pattern.arrays() * self.len * 4) as f64
    }

    /// Runs `passes` (≥ 1) passes of `pattern`; returns the bytes moved.
    pub fn run(&mut self, pattern: Pattern, passes: u64) -> f64 {
        let passes = passes.max(1);
        let len = self.len;
        let arrays = &mut self.storage[self.offset..self.offset + 3 * len];
        let (x, rest) = arrays.split_at_mut(len);
        let (y, z) = rest.split_at_mut(len);
        run_passes(self.wide, pattern, passes, x, y, z);
        std::hint::black_box(&mut *z);
        passes as f64 * self.bytes_per_pass(pattern)
    }
}

/// `passes` (≥ 1) passes of `pattern` over arrays of equal length (a
/// multiple of [`BLOCK`]); the assembly loops run every pass themselves, so
/// that no per-pass overhead of a debug build counts against a small cache.
fn run_passes(
    wide: Option<Isa>,
    pattern: Pattern,
    passes: u64,
    x: &mut [f32],
    y: &mut [f32],
    z: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = wide {
        let bytes = x.len() * 4;
        let (x, y, z) = (x.as_ptr(), y.as_mut_ptr(), z.as_mut_ptr());
        // SAFETY: `wide` is only set where the ISA was detected; the arrays
        // hold `bytes` bytes each, a multiple of one iteration's 512 bytes.
        unsafe {
            match (isa, pattern) {
                (Isa::Avx512, Pattern::Read) => x86::read_zmm(x, bytes, passes),
                (Isa::Avx512, Pattern::ReadWrite) => x86::scale_zmm(x, y, bytes, passes),
                (Isa::Avx512, Pattern::Triad) => x86::triad_zmm(x, y, z, bytes, passes),
                (_, Pattern::Read) => x86::read_ymm(x, bytes, passes),
                (_, Pattern::ReadWrite) => x86::scale_ymm(x, y, bytes, passes),
                (_, Pattern::Triad) => x86::triad_ymm(x, y, z, bytes, passes),
            }
        }
        return;
    }
    let _ = wide;
    for _ in 0..passes {
        portable_pass(pattern, x, y, z);
    }
}

/// One pass of `pattern` in plain Rust.
fn portable_pass(pattern: Pattern, x: &[f32], y: &mut [f32], z: &mut [f32]) {
    match pattern {
        Pattern::Read => {
            let mut sums = [0f32; 16];
            for chunk in x.chunks_exact(16) {
                for (s, v) in sums.iter_mut().zip(chunk) {
                    *s += v;
                }
            }
            std::hint::black_box(sums);
        }
        Pattern::ReadWrite => {
            for (y, x) in y.iter_mut().zip(x.iter()) {
                *y = *x * 0.5 + 1.0;
            }
        }
        Pattern::Triad => {
            for ((z, x), y) in z.iter_mut().zip(x.iter()).zip(y.iter()) {
                *z = *x * 0.5 + *y;
            }
        }
    }
}

/// The widest ISA with assembly loops this CPU runs.
fn wide_isa() -> Option<Isa> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return Some(Isa::Avx512);
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            return Some(Isa::Avx2Fma);
        }
    }
    None
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The streaming loops in assembly: 8 vectors per iteration, every
    //! pass inside the assembly.

    use std::arch::asm;

    /// `a` and `b` of the read+write and triad loops.
    static CONSTANTS: [f32; 2] = [0.5, 1.0];

    /// One loop: `setup` lines, then `passes` passes of `body` over `bytes`
    /// bytes (a positive multiple of `step`) of each array.
    macro_rules! stream_loop {
        (
            $(#[$doc:meta])*
            fn $name:ident($($arg:ident: $ty:ty),*) feature $feature:literal, step $step:literal,
            setup [$($setup:expr),*], body [$($body:expr),*],
            operands [$($operand:tt)*], clobbers [$($clobber:tt),*], options ($($option:ident),*)
        ) => {
            $(#[$doc])*
            ///
            /// # Safety
            /// The CPU must run the ISA; each array holds `bytes` bytes (the
            /// written ones writable), a positive multiple of one iteration;
            /// `passes` ≥ 1.
            #[target_feature(enable = $feature)]
            pub unsafe fn $name($($arg: $ty,)* bytes: usize, passes: u64) {
                // SAFETY: touches `bytes` bytes of each array, as the caller
                // guarantees valid, and only the registers it names.
                unsafe {
                    asm!(
                        $($setup,)*
                        "3:",
                        "xor {i:e}, {i:e}",
                        "2:",
                        $($body,)*
                        concat!("add {i}, ", $step),
                        "cmp {i}, {bytes}",
                        "jb 2b",
                        "dec {passes}",
                        "jnz 3b",
                        "vzeroupper",
                        $($operand)*
                        bytes = in(reg) bytes,
                        i = out(reg) _,
                        passes = inout(reg) passes => _,
                        $(out($clobber) _,)*
                        options($($option),*),
                    );
                }
            }
        };
    }

    /// The read, read+write and triad loops on the registers named `$r`.
    macro_rules! stream_loops {
        (
            feature: $feature:literal, reg: $r:literal, ptr: $ptr:literal, step: $step:literal,
            vectors: [$(($n:literal, $o:literal)),*],
            clobbers: [$($reg:tt),*],
            read: $read:ident, scale: $scale:ident, triad: $triad:ident $(,)?
        ) => {
            stream_loop! {
                /// Loads `x`.
                fn $read(x: *const f32) feature $feature, step $step,
                setup [],
                body [$(concat!("vmovups ", $r, $n, ", ", $ptr, " ptr [{x} + {i} + ", $o, "]")),*],
                operands [x = in(reg) x,], clobbers [$($reg),*], options (nostack, readonly)
            }

            stream_loop! {
                /// `y[i] = x[i]·a + b`.
                fn $scale(x: *const f32, y: *mut f32) feature $feature, step $step,
                setup [
                    concat!("vbroadcastss ", $r, "14, dword ptr [{k}]"),
                    concat!("vbroadcastss ", $r, "15, dword ptr [{k} + 4]")
                ],
                body [$(
                    concat!("vmovups ", $r, $n, ", ", $ptr, " ptr [{x} + {i} + ", $o, "]"),
                    concat!("vfmadd213ps ", $r, $n, ", ", $r, "14, ", $r, "15"),
                    concat!("vmovups ", $ptr, " ptr [{y} + {i} + ", $o, "], ", $r, $n)
                ),*],
                operands [k = in(reg) CONSTANTS.as_ptr(), x = in(reg) x, y = in(reg) y,],
                clobbers [$($reg),*], options (nostack)
            }

            stream_loop! {
                /// `z[i] = x[i]·a + y[i]`.
                fn $triad(x: *const f32, y: *const f32, z: *mut f32) feature $feature, step $step,
                setup [concat!("vbroadcastss ", $r, "14, dword ptr [{k}]")],
                body [$(
                    concat!("vmovups ", $r, $n, ", ", $ptr, " ptr [{x} + {i} + ", $o, "]"),
                    concat!("vfmadd213ps ", $r, $n, ", ", $r, "14, ", $ptr, " ptr [{y} + {i} + ", $o, "]"),
                    concat!("vmovups ", $ptr, " ptr [{z} + {i} + ", $o, "], ", $r, $n)
                ),*],
                operands [k = in(reg) CONSTANTS.as_ptr(), x = in(reg) x, y = in(reg) y, z = in(reg) z,],
                clobbers [$($reg),*], options (nostack)
            }
        };
    }

    stream_loops! {
        feature: "avx2,fma", reg: "ymm", ptr: "ymmword", step: "256",
        vectors: [(0, 0), (1, 32), (2, 64), (3, 96), (4, 128), (5, 160), (6, 192), (7, 224)],
        clobbers: ["ymm0", "ymm1", "ymm2", "ymm3", "ymm4", "ymm5", "ymm6", "ymm7", "ymm14", "ymm15"],
        read: read_ymm, scale: scale_ymm, triad: triad_ymm,
    }

    stream_loops! {
        feature: "avx512f", reg: "zmm", ptr: "zmmword", step: "512",
        vectors: [(0, 0), (1, 64), (2, 128), (3, 192), (4, 256), (5, 320), (6, 384), (7, 448)],
        clobbers: ["zmm0", "zmm1", "zmm2", "zmm3", "zmm4", "zmm5", "zmm6", "zmm7", "zmm14", "zmm15"],
        read: read_zmm, scale: scale_zmm, triad: triad_zmm,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_computes_what_it_says_over_whole_blocks() {
        let mut streams = Streams::new(3 * 4 * 2 * BLOCK as u64);
        assert_eq!(streams.len, 2 * BLOCK);
        let len = streams.len;
        let base = streams.offset;
        for (i, v) in streams.storage[base..base + 3 * len].iter_mut().enumerate() {
            *v = (i % 7) as f32;
        }
        assert_eq!(streams.run(Pattern::ReadWrite, 1), (8 * len) as f64);
        assert_eq!(streams.run(Pattern::Triad, 2), (2 * 12 * len) as f64);
        assert_eq!(streams.run(Pattern::Read, 1), (4 * len) as f64);
        let arrays = &streams.storage[base..base + 3 * len];
        for i in 0..len {
            let x = (i % 7) as f32;
            let y = x * 0.5 + 1.0;
            assert_eq!(arrays[len + i], y, "y[{i}]");
            assert_eq!(arrays[2 * len + i], x * 0.5 + y, "z[{i}]");
        }
        assert_eq!(streams.isa(), wide_isa());
    }
}
