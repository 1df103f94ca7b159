//! Attention scores q·kᵀ/√D with a fixed head size and an intrinsic.

tessera::op! {
    /// Scaled dot-product scores.
    pub fn scores(q: f32[L, 4], k: f32[S, 4]) -> f32[L, S] {
        out[i, j] = sum(d) q[i, d] * k[j, d] / sqrt(4.0)
    }
}

fn main() {
    assert_eq!(scores::PARAMS, &["L", "S"]);
    let dag = scores::dag(&[1, 2]).expect("builds");
    assert_eq!(dag.label(), "scores[L=1,S=2,f32]");
    let q = [1.0, 2.0, 3.0, 4.0];
    let k = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 2.0];
    let mut out = [0.0f32; 2];
    scores::Compiled::new(&[1, 2])
        .expect("compiles")
        .call(&q, &k, &mut out)
        .expect("runs");
    assert_eq!(out, [5.0, 4.0]);
}
