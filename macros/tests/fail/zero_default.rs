tessera::op! {
    #[defaults(M = 0)]
    pub fn double(x: f32[M]) -> f32[M] {
        out[i] = x[i] * 2.0
    }
}

fn main() {}
