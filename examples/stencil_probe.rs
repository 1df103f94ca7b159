//! Times each stencil primitive this CPU may run on the planes of a
//! depthwise R×R convolution, padded input already in place (`cargo run
//! --release --example stencil_probe -- C H W STRIDE [R]`, default `128 56
//! 56 1 3`): one call per channel plane, as the lowered kernels make them; the
//! median over 200 passes, in µs and GFLOP/s. The figure to compare with a
//! whole `tessera bench depthwise_conv2d` (which also copies the padding).

use std::time::Instant;

use tessera::runtime::Target;
use tessera::runtime::stencil::{StencilShape, all_primitives, run};

fn parse_args() -> Result<[usize; 5], String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        return Ok([128, 56, 56, 1, 3]);
    }
    let values: Vec<usize> = args
        .iter()
        .map(|a| a.parse::<usize>().map_err(|e| format!("'{a}': {e}")))
        .collect::<Result<_, _>>()?;
    let positive = |v: &[usize]| v.iter().all(|&x| x > 0);
    match values[..] {
        [c, h, w, stride] if positive(&values) => Ok([c, h, w, stride, 3]),
        [c, h, w, stride, r] if positive(&values) => Ok([c, h, w, stride, r]),
        _ => Err("expected four or five positive numbers: C H W STRIDE [R]".into()),
    }
}

fn main() {
    let [c, h, w, stride, r] = parse_args().unwrap_or_else(|e| {
        eprintln!("stencil_probe: {e} (e.g. `-- 128 56 56 1`)");
        std::process::exit(2);
    });
    let target = Target::host();
    let (ph, pw) = (h + r - 1, w + r - 1);
    let (oh, ow) = ((h - 1) / stride + 1, (w - 1) / stride + 1);
    let input: Vec<f32> = (0..c * ph * pw).map(|i| (i % 17) as f32 * 0.1).collect();
    let weight: Vec<f32> = (0..c * r * r).map(|i| (i % 5) as f32 * 0.3).collect();
    let mut out = vec![0f32; c * oh * ow];
    let shape = StencilShape {
        n: ow as i64,
        taps_r: r as i64,
        taps_s: r as i64,
        in_x: stride as i64,
        in_r: pw as i64,
        in_s: 1,
        w_r: r as i64,
        w_s: 1,
        rows: oh as i64,
        out_y: ow as i64,
        in_y: (stride * pw) as i64,
    };
    let flop = 2.0 * (r * r * c * oh * ow) as f64;
    for primitive in all_primitives().iter().filter(|p| p.isa <= target.isa()) {
        let mut samples: Vec<f64> = (0..200)
            .map(|_| {
                let start = Instant::now();
                for ch in 0..c {
                    let result = run(
                        &target,
                        primitive,
                        &mut out[ch * oh * ow..],
                        &input[ch * ph * pw..],
                        &weight[ch * r * r..],
                        shape,
                        false,
                    );
                    if let Err(e) = result {
                        eprintln!("{e}");
                        std::process::exit(1);
                    }
                }
                start.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        samples.sort_by(f64::total_cmp);
        let median = samples[samples.len() / 2];
        println!(
            "{:<16} C={c} {h}x{w} {r}x{r} stride {stride}: {median:.1} µs, {:.1} GFLOP/s (median of 200)",
            primitive.name,
            flop / median / 1e3
        );
    }
}
