//! A 2-D stencil with zero padding written with `if`, after a clamp written
//! with `select`.

tessera::op! {
    /// Clamp to 0.5, then a 3×3 sum with zero padding.
    pub fn box3(x: f32[H, W]) -> f32[H, W] {
        clamped[i, j] = select(x[i, j] > 0.5, 0.5, x[i, j]);
        out[i, j] = sum(r in 0..3, s in 0..3)
            if i + r >= 1 && i + r <= H && j + s >= 1 && j + s <= W {
                clamped[i + r - 1, j + s - 1]
            } else {
                0.0
            }
    }
}

fn main() {
    let op = box3::Compiled::new(&[3, 3]).expect("compiles");
    let x = [1.0f32; 9];
    let mut out = [0.0f32; 9];
    op.call(&x, &mut out).expect("runs");
    assert_eq!(out, [2.0, 3.0, 2.0, 3.0, 4.5, 3.0, 2.0, 3.0, 2.0]);
    let x = [0.25f32; 9];
    op.call(&x, &mut out).expect("runs");
    assert_eq!(out, [1.0, 1.5, 1.0, 1.5, 2.25, 1.5, 1.0, 1.5, 1.0]);
}
