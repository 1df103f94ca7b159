//! The example's operators, written with `tessera::op!`. Each registers
//! itself, so this binary's `tessera` commands (`ops`, `tune`, `show`,
//! `bench`, `deploy`) know them by name.

tessera::op! {
    /// Dense layer with bias and ReLU.
    #[defaults(M = 64, K = 256, N = 256)]
    pub fn dense_relu(x: f32[M, K], w: f32[N, K], b: f32[N]) -> f32[M, N] {
        y[i, j] = sum(k) x[i, k] * w[j, k];
        out[i, j] = max(y[i, j] + b[j], 0.0)
    }
}

tessera::op! {
    /// Multi-head attention scores q·kᵀ/√D.
    #[defaults(B = 2, H = 4, L = 64, D = 32, S = 64)]
    pub fn attention_scores(q: f32[B, H, L, D], k: f32[B, H, S, D]) -> f32[B, H, L, S] {
        dot[b, h, i, j] = sum(d) q[b, h, i, d] * k[b, h, j, d];
        scores[b, h, i, j] = dot[b, h, i, j] / sqrt(D as f32)
    }
}

tessera::op! {
    /// Row normalisation (RMS norm without gain): each row of x divided by
    /// the root of its mean square plus 1e-5, as a multiplication by the
    /// row's reciprocal. Memory-bound: two passes over the row, one
    /// reduction; `bench/ort/` compares it with ONNX Runtime.
    #[defaults(M = 128, N = 1024)]
    pub fn rms_norm(x: f32[M, N]) -> f32[M, N] {
        sum_sq[i] = sum(k) x[i, k] * x[i, k];
        rstd[i] = 1.0 / sqrt(sum_sq[i] / (N as f32) + 1e-5);
        out[i, j] = x[i, j] * rstd[i]
    }
}

/// `P=V,…` for `--shape`, from an op's `PARAMS` and values in that order.
pub fn shape_text(params: &[&str], values: &[i64]) -> String {
    params
        .iter()
        .zip(values)
        .map(|(p, v)| format!("{p}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
