//! The example: dense layer, bias, ReLU; compiled and called.

tessera::op! {
    /// Dense layer with bias and ReLU.
    pub fn dense_relu(x: f32[M, K], w: f32[N, K], b: f32[N]) -> f32[M, N] {
        y[i, j] = sum(k) x[i, k] * w[j, k];
        out[i, j] = max(y[i, j] + b[j], 0.0)
    }
}

fn main() {
    assert_eq!(dense_relu::PARAMS, &["M", "K", "N"]);
    assert_eq!(dense_relu::DOC, "Dense layer with bias and ReLU.");
    let op = dense_relu::Compiled::new(&[2, 3, 2]).expect("compiles");
    let x = [1.0, 2.0, 3.0, -1.0, -2.0, -3.0];
    let w = [1.0, 0.0, 0.0, 0.0, 1.0, 1.0];
    let b = [0.5, -1.0];
    let mut out = [0.0f32; 4];
    op.call(&x, &w, &b, &mut out).expect("runs");
    assert_eq!(out, [1.5, 4.0, 0.0, 0.0]);
}
