//! Prints the cost of each row primitive this CPU may run, in ns per
//! element over an L1-resident row (`cargo run --release --example
//! row_math_cost`): the figure to compare with the inline f32x4 code
//! (`tessera bench gelu`, `tessera bench softmax`).

use tessera::runtime::Target;
use tessera::runtime::row_math::{all_primitives, run};

fn main() {
    let target = Target::host();
    let row: Vec<f32> = (0..1024).map(|i| (i as f32 - 512.0) / 97.0).collect();
    for primitive in all_primitives().iter().filter(|p| p.isa <= target.isa()) {
        let mut samples: Vec<f64> = (0..41)
            .map(|_| {
                let mut data = row.clone();
                let start = std::time::Instant::now();
                for _ in 0..200 {
                    data.copy_from_slice(&row);
                    if let Err(e) = run(&target, primitive, &mut data) {
                        eprintln!("{e}");
                        std::process::exit(1);
                    }
                }
                start.elapsed().as_secs_f64() * 1e9 / (200.0 * row.len() as f64)
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        println!(
            "{:<16} {:.3} ns/element (median of 41; includes a 4 KiB copy)",
            primitive.name, samples[20]
        );
    }
}
