tessera::op! {
    pub fn scale(x: i32[N], s: f32[N]) -> f32[N] {
        out[i] = x[i] * s[i]
    }
}

fn main() {}
