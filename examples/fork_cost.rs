//! Prints the fork cost of the runtime's thread pool: the median time of a
//! parallel loop with an empty body, for 2 and more threads (`cargo run
//! --release --example fork_cost`). Code generation runs a parallel loop
//! serially when its work is too small to repay this (see
//! `codegen`'s `MIN_PARALLEL_STORES`).

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for threads in (2..=cores.max(2)).filter(|t| t.is_power_of_two() || *t == cores) {
        // Warm the pool first: its threads start on first use.
        tessera::runtime::parallel::fork_cost(threads, 100);
        let median = tessera::runtime::parallel::fork_cost(threads, 2001);
        println!(
            "fork cost, {threads} threads: {:.2} us (median of 2001 empty loops of {threads} chunks)",
            median.as_secs_f64() * 1e6
        );
    }
}
