tessera::op! {
    pub fn add(x: f32[N], y: f32[N]) -> f32[N] {
        out[i] = x[i] + z[i]
    }
}

fn main() {}
