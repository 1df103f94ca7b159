tessera::op! {
    pub fn rowsum(x: f32[M, N]) -> f32[M] {
        out[i] = sum(j) x[i, j, j]
    }
}

fn main() {}
