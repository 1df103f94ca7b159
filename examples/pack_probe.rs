//! Times each packing routine this CPU may run on one copy shape (`cargo
//! run --release --example pack_probe -- ROWS COLS SRC_RS SRC_CS DST_RS`,
//! default `3 32 1 2 32`: one 32-wide block of a stride-2 3-tap panel row, as
//! a convolution stem's im2col panel packs it): the best of seven passes of
//! 200,000 calls, in ns per call. The figure to compare the instruction
//! sets' routines with, since the search picks among them per panel.

use std::time::Instant;

use tessera::runtime::Target;
use tessera::runtime::pack::{all_routines, allowed_isas};

fn parse_args() -> Result<[i64; 5], String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        return Ok([3, 32, 1, 2, 32]);
    }
    let values: Vec<i64> = args
        .iter()
        .map(|a| a.parse::<i64>().map_err(|e| format!("'{a}': {e}")))
        .collect::<Result<_, _>>()?;
    match values[..] {
        [rows, cols, src_rs, src_cs, dst_rs]
            if rows > 0 && cols > 0 && src_rs >= 0 && src_cs > 0 && dst_rs >= cols =>
        {
            Ok([rows, cols, src_rs, src_cs, dst_rs])
        }
        _ => Err("expected ROWS COLS SRC_RS SRC_CS DST_RS: positive sizes, \
                  SRC_RS ≥ 0, SRC_CS ≥ 1, DST_RS ≥ COLS"
            .into()),
    }
}

fn main() {
    let [rows, cols, src_rs, src_cs, dst_rs] = parse_args().unwrap_or_else(|e| {
        eprintln!("pack_probe: {e} (e.g. `-- 3 32 1 2 32`)");
        std::process::exit(2);
    });
    let target = Target::host();
    let allowed = allowed_isas(&target);
    let last = (rows - 1) * src_rs + (cols - 1) * src_cs + 1;
    let src: Vec<f32> = (0..last).map(|i| (i % 17) as f32).collect();
    let mut dst = vec![0f32; ((rows - 1) * dst_rs + cols) as usize];
    for routine in all_routines().iter().filter(|r| allowed.contains(&r.isa)) {
        let mut best = f64::MAX;
        for _ in 0..7 {
            let start = Instant::now();
            for _ in 0..200_000 {
                // SAFETY: the CPU runs the routine's ISA (allowed by the
                // target); `src` holds every element the region names, `dst`
                // every one it writes, and they do not overlap.
                unsafe {
                    (routine.func)(
                        src.as_ptr(),
                        src_rs,
                        src_cs,
                        dst.as_mut_ptr(),
                        dst_rs,
                        rows,
                        cols,
                    )
                };
                std::hint::black_box(&mut dst);
            }
            best = best.min(start.elapsed().as_secs_f64());
        }
        println!(
            "{:<12} {rows}x{cols} src strides ({src_rs}, {src_cs}): {:.1} ns per call",
            routine.name,
            best / 200_000.0 * 1e9
        );
    }
}
