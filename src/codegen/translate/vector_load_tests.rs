//! Vector loads at buffer edges: kernels whose strided and speculative
//! vector reads touch the first and last elements of an input placed
//! against an inaccessible page, so that any read outside the buffer
//! faults; results compared with the IR interpreter.

use std::ffi::c_void;

use crate::codegen::{CodegenOptions, compile};
use crate::runtime::NdBuffer;
use crate::schedule::{State, steps_from_json};
use crate::te::{ComputeDag, DType, HostTensor};
use crate::tir;

unsafe extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64)
    -> *mut c_void;
    fn mprotect(addr: *mut c_void, len: usize, prot: i32) -> i32;
    fn munmap(addr: *mut c_void, len: usize) -> i32;
}

const PROT_NONE: i32 = 0;
const PROT_READ_WRITE: i32 = 3;
const MAP_PRIVATE_ANONYMOUS: i32 = 0x02 | 0x20;
const PAGE: usize = 4096;

/// Three pages, the first and last inaccessible.
struct Fenced {
    base: *mut u8,
}

impl Fenced {
    fn new() -> Fenced {
        // SAFETY: an anonymous private mapping, checked below; the guard
        // pages are changed only inside it.
        unsafe {
            let base = mmap(
                std::ptr::null_mut(),
                3 * PAGE,
                PROT_READ_WRITE,
                MAP_PRIVATE_ANONYMOUS,
                -1,
                0,
            );
            assert!(!base.is_null() && base as isize != -1, "mmap failed");
            let base = base.cast::<u8>();
            assert_eq!(mprotect(base.cast(), PAGE, PROT_NONE), 0);
            assert_eq!(mprotect(base.add(2 * PAGE).cast(), PAGE, PROT_NONE), 0);
            Fenced { base }
        }
    }

    /// `bytes` copied to the start (`at_end` false) or the end of the
    /// accessible page; the address.
    fn place(&self, bytes: &[u8], at_end: bool) -> *mut u8 {
        assert!(bytes.len() <= PAGE);
        let offset = if at_end { 2 * PAGE - bytes.len() } else { PAGE };
        // SAFETY: the range lies inside the accessible middle page.
        unsafe {
            let at = self.base.add(offset);
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, bytes.len());
            at
        }
    }
}

impl Drop for Fenced {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { munmap(self.base.cast(), 3 * PAGE) };
    }
}

fn build(op: &str, params: &[(&str, i64)]) -> ComputeDag {
    let spec = crate::ops::find(op).expect("op");
    spec.build(&spec.shape(params).expect("shape"))
        .expect("dag")
}

/// Runs `steps` of `dag` with its first input against each fence (its
/// other inputs and outputs in ordinary buffers) and compares with the IR
/// interpreter; returns the machine-code listing.
fn check_fenced(label: &str, dag: &ComputeDag, steps: &str) -> String {
    let steps = steps_from_json(steps).expect("steps");
    let state = State::replay(dag, &steps).unwrap_or_else(|e| panic!("{label}: {e}"));
    let func = tir::lower(&state).expect("lower");
    let options = CodegenOptions {
        listing: true,
        ..CodegenOptions::default()
    };
    let kernel = compile(&func, &options).expect("compile");
    let inputs: Vec<HostTensor> = dag
        .inputs()
        .iter()
        .enumerate()
        .map(|(n, t)| {
            let shape: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect();
            HostTensor::random(&shape, DType::F32, 11 + n as u64)
        })
        .collect();
    let want = tir::run(&func, &inputs).expect("interpreter");
    let fence = Fenced::new();
    for at_end in [false, true] {
        let mut buffers = kernel.buffers_for(&inputs).expect("buffers");
        let first = fence.place(buffers[0].as_bytes(), at_end);
        let mut pointers: Vec<*mut u8> = buffers.iter_mut().map(NdBuffer::as_mut_ptr).collect();
        pointers[0] = first;
        // SAFETY: every pointer addresses a live buffer of its parameter's
        // size (the first a copy inside the fence).
        unsafe { kernel.call_raw(&pointers) };
        for (o, w) in want.iter().enumerate() {
            let got = buffers[inputs.len() + o].to_host().to_f64_vec();
            for (i, (g, w)) in got.iter().zip(w.to_f64_vec()).enumerate() {
                assert!(
                    (g - w).abs() <= 1e-5 * w.abs().max(1.0),
                    "{label} (at_end {at_end}): output {o}[{i}] = {g}, want {w}"
                );
            }
        }
    }
    kernel.listing().unwrap_or_default().to_string()
}

/// Pooling and depthwise convolution with the padding inlined (speculative
/// reads of the input under the padding's select) and the output width
/// vectorized innermost: at stride 1 contiguous, at stride 2 strided.
#[test]
fn speculative_and_strided_reads_stay_inside_a_fenced_input() {
    let inline_and_vectorize = |stage: &str, factor: i64| {
        format!(
            r#"[{{"kind": "compute_inline", "stage": "pad"}},
                {{"kind": "split", "stage": "{stage}", "iter": "i3", "factors": [{factor}]}},
                {{"kind": "reorder", "stage": "{stage}", "order": ["i0", "i1", "i2", "i3.0", "rr", "rs", "i3.1"]}},
                {{"kind": "annotate", "stage": "{stage}", "iter": "i3.1", "annotation": "vectorize"}}]"#
        )
    };
    for stride in [1, 2, 3] {
        // Output widths 8 (two unrolled chunks) and 40 (a loop of ten).
        for (ow, factor) in [(8, 4), (40, 40)] {
            let params = [
                ("N", 1),
                ("C", 1),
                ("H", 5),
                ("W", (ow - 1) * stride + 1),
                ("R", 3),
                ("S", 3),
                ("stride", stride),
                ("pad", 1),
            ];
            for op in ["max_pool2d", "depthwise_conv2d"] {
                let label = format!("{op} stride {stride} output width {ow}");
                let listing = check_fenced(
                    &label,
                    &build(op, &params),
                    &inline_and_vectorize(op, factor),
                );
                // The padding's bounds test as vector compares, and the
                // strided reads deinterleaved.
                assert!(listing.contains("pcmpgtd"), "{label}:\n{listing}");
                assert_eq!(
                    listing.contains("shufps"),
                    stride > 1,
                    "{label}:\n{listing}"
                );
            }
        }
    }
}

/// Without padding, a strided read of the input's last row over-reads
/// past the last element unless the bounds check stops it.
#[test]
fn strided_reads_without_padding_stop_at_the_buffer_end() {
    for stride in [2, 3, 4] {
        let params = [
            ("N", 1),
            ("C", 1),
            // The last output row and column read the input's last ones.
            ("H", 2 * stride + 1),
            ("W", 3 * stride + 1),
            ("R", 1),
            ("S", 1),
            ("stride", stride),
            ("pad", 0),
        ];
        let label = format!("max_pool2d 1x1 stride {stride}");
        let listing = check_fenced(
            &label,
            &build("max_pool2d", &params),
            r#"[{"kind": "split", "stage": "max_pool2d", "iter": "i3", "factors": [4]},
                {"kind": "reorder", "stage": "max_pool2d", "order": ["i0", "i1", "i2", "i3.0", "rr", "rs", "i3.1"]},
                {"kind": "annotate", "stage": "max_pool2d", "iter": "i3.1", "annotation": "vectorize"}]"#,
        );
        assert!(listing.contains("shufps"), "{label}:\n{listing}");
    }
}

/// A split that does not divide guards its vectorized loop: a chunk every
/// lane of which passes the guard runs as vectors, a chunk at the edge lane
/// by lane (never loading past the input's last element), and the result is
/// the interpreter's.
#[test]
fn guarded_chunks_that_pass_whole_run_as_vectors_and_edges_stay_inside() {
    for (n, factor) in [(10, 8), (22, 16), (7, 4), (13, 12)] {
        let label = format!("relu N={n} split {factor}");
        let listing = check_fenced(
            &label,
            &build("relu", &[("M", 3), ("N", n)]),
            &format!(
                r#"[{{"kind": "split", "stage": "relu", "iter": "i1", "factors": [{factor}]}},
                    {{"kind": "annotate", "stage": "relu", "iter": "i1.1", "annotation": "vectorize"}}]"#
            ),
        );
        let vector_store = listing.lines().any(|l| {
            l.contains("movups %xmm") && l.contains("%xmm") && l.trim_end().ends_with(')')
        });
        assert!(vector_store, "{label}: no vector store\n{listing}");
    }
}
