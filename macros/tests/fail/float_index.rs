tessera::op! {
    pub fn gather(x: f32[N], idx: f32[N]) -> f32[N] {
        out[i] = x[idx[i]]
    }
}

fn main() {}
