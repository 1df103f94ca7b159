//! `#[defaults]` and registration: the op is found by name with its defaults,
//! and the registry builds the same DAG as the module's `dag`.

tessera::op! {
    /// Doubles every element.
    #[defaults(M = 64)]
    pub fn double(x: f32[M]) -> f32[M] {
        out[i] = x[i] * 2.0
    }
}

fn main() {
    let op = tessera::ops::find("double").expect("registered");
    assert_eq!(op.description, "Doubles every element. (x[M] → out[M])");
    let shape = op.default_shape().expect("defaults");
    assert_eq!(shape.to_text(), "M=64");
    let dag = op.build(&shape).expect("builds");
    assert_eq!(dag.workload_key(), double::dag(&[64]).expect("builds").workload_key());
}
