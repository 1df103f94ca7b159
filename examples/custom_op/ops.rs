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

/// `P=V,…` for `--shape`, from an op's `PARAMS` and values in that order.
pub fn shape_text(params: &[&str], values: &[i64]) -> String {
    params
        .iter()
        .zip(values)
        .map(|(p, v)| format!("{p}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}
