tessera::op! {
    pub fn shift(x: f32[N]) -> f32[N] {
        out[i] = x[j]
    }
}

fn main() {}
