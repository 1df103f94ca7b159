//! Rust GEMM peers on the same inputs: `matrixmultiply` (single thread) and
//! `gemm` (rayon, the requested threads), for the matrix-product ops; built
//! with the `cli` feature only (the peer crates are its dependencies).

use gemm::Parallelism;

use crate::codegen::KernelError;
use crate::runtime::NdBuffer;
use crate::te::{DType, HostTensor};

use super::error::BenchError;

/// A product `C[b] = A[b] · B[b]` described by strides (in elements).
#[derive(Clone, Copy, Debug)]
pub(super) struct Product {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Row and column strides of A.
    pub a: (isize, isize),
    /// Row and column strides of B.
    pub b: (isize, isize),
    /// Elements between consecutive batches of A, B and C.
    pub batch_strides: (usize, usize, usize),
}

impl Product {
    /// The product an op computes, if it is one (C row-major `m × n`).
    pub fn of(op: &str, get: &dyn Fn(&str) -> usize) -> Option<Product> {
        let (m, n, k) = (get("M"), get("N"), get("K"));
        let plain = |b: (isize, isize)| Product {
            batch: 1,
            m,
            n,
            k,
            a: (k as isize, 1),
            b,
            batch_strides: (0, 0, 0),
        };
        match op {
            "matmul" => Some(plain((n as isize, 1))),
            "matmul_nt" | "dense" => Some(plain((1, k as isize))),
            "batch_matmul" => Some(Product {
                batch: get("B"),
                batch_strides: (m * k, k * n, m * n),
                ..plain((n as isize, 1))
            }),
            _ => None,
        }
    }
}

impl Product {
    /// Element offsets of A, B and C for each batch.
    fn batches(&self) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
        (0..self.batch).map(|b| {
            (
                b * self.batch_strides.0,
                b * self.batch_strides.1,
                b * self.batch_strides.2,
            )
        })
    }
}

/// Runs `p` with `matrixmultiply::sgemm` into `c`.
fn matrixmultiply(p: &Product, a: &NdBuffer, b: &NdBuffer, c: &mut NdBuffer) {
    let (Some(a), Some(b)) = (a.as_f32(), b.as_f32()) else {
        return;
    };
    let Some(c) = c.as_f32_mut() else { return };
    for (oa, ob, oc) in p.batches() {
        // SAFETY: the strides describe `m × k`, `k × n` and `m × n` matrices
        // inside the buffers (checked by the caller's shapes).
        unsafe {
            matrixmultiply::sgemm(
                p.m,
                p.k,
                p.n,
                1.0,
                a.as_ptr().add(oa),
                p.a.0,
                p.a.1,
                b.as_ptr().add(ob),
                p.b.0,
                p.b.1,
                0.0,
                c.as_mut_ptr().add(oc),
                p.n as isize,
                1,
            );
        }
    }
}

/// Runs `p` with the `gemm` crate on `threads` threads into `c`.
fn gemm_crate(p: &Product, a: &NdBuffer, b: &NdBuffer, c: &mut NdBuffer, threads: usize) {
    let (Some(a), Some(b)) = (a.as_f32(), b.as_f32()) else {
        return;
    };
    let Some(c) = c.as_f32_mut() else { return };
    let parallelism = if threads > 1 {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    };
    for (oa, ob, oc) in p.batches() {
        // SAFETY: as in `matrixmultiply`; `gemm` takes column then row strides.
        unsafe {
            gemm::gemm(
                p.m,
                p.n,
                p.k,
                c.as_mut_ptr().add(oc),
                1,
                p.n as isize,
                false,
                a.as_ptr().add(oa),
                p.a.1,
                p.a.0,
                b.as_ptr().add(ob),
                p.b.1,
                p.b.0,
                0.0,
                1.0,
                false,
                false,
                false,
                parallelism,
            );
        }
    }
}

/// The peers' runs of one product: its two inputs and an output for each.
pub(super) struct PeerRuns {
    product: Product,
    a: NdBuffer,
    b: NdBuffer,
    matrixmultiply_c: NdBuffer,
    gemm_c: NdBuffer,
    threads: usize,
}

/// A named run to time.
pub(super) type NamedRun<'a> = (&'static str, Box<dyn FnMut() + 'a>);

impl PeerRuns {
    /// The peers of `op` (`get` reads its shape parameters) on the first two
    /// of `inputs`, writing outputs of `output_shape`; `None` when the op is
    /// no matrix product.
    pub fn new(
        op: &str,
        get: &dyn Fn(&str) -> usize,
        inputs: &[HostTensor],
        output_shape: &[usize],
        threads: usize,
    ) -> Result<Option<PeerRuns>, BenchError> {
        let Some(product) = Product::of(op, get) else {
            return Ok(None);
        };
        let [a, b, ..] = inputs else {
            return Ok(None);
        };
        let buffer = |t: &HostTensor| NdBuffer::from_host(t).map_err(KernelError::from);
        let output = || NdBuffer::zeros(output_shape, DType::F32).map_err(KernelError::from);
        Ok(Some(PeerRuns {
            product,
            a: buffer(a)?,
            b: buffer(b)?,
            matrixmultiply_c: output()?,
            gemm_c: output()?,
            threads,
        }))
    }

    /// `matrixmultiply` and `gemm`, in that order.
    pub fn runs(&mut self) -> Vec<NamedRun<'_>> {
        let (p, a, b, threads) = (self.product, &self.a, &self.b, self.threads);
        let (c, c2) = (&mut self.matrixmultiply_c, &mut self.gemm_c);
        vec![
            (
                "matrixmultiply",
                Box::new(move || matrixmultiply(&p, a, b, c)),
            ),
            ("gemm", Box::new(move || gemm_crate(&p, a, b, c2, threads))),
        ]
    }
}
