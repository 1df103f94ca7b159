//! One bounded, deterministic e-graph run: convert, saturate under iteration
//! and node limits (no time limit, so results never depend on machine load),
//! extract the cheapest term, convert back. Runs are memoised per thread
//! ([`cache`](super::cache)).

use std::time::Duration;

use egg::{CostFunction, Extractor, RecExpr, Runner};

use super::analysis::IndexAnalysis;
use super::cache::{self, Key};
use super::convert::Converted;
use super::cost::TreeSize;
use super::language::IndexLang;
use super::rules::rules;
use crate::te::Expr;

/// Rewrite iterations per run.
pub(super) const ITER_LIMIT: usize = 8;

/// E-nodes per run.
pub(super) const NODE_LIMIT: usize = 3_000;

/// Effectively no time limit: stopping on time would make results depend on
/// the machine's load.
const NO_TIME_LIMIT: Duration = Duration::from_secs(365 * 24 * 3600);

/// The cheapest equivalent of `e` the rules find, or `None` if it is not
/// strictly cheaper than `e` (fewer nodes, or as many with fewer divisions).
pub(super) fn run(e: &Expr) -> Option<Expr> {
    let conv = Converted::new(e);
    let sizes = conv.leaf_sizes();
    let analysis = conv.analysis();
    let key = Key::new(
        &conv.expr,
        analysis.var_extents.clone(),
        &analysis.leaves,
        &sizes,
    );
    let best = cache::remember(key, || saturate(&conv.expr, analysis, &sizes))?;
    conv.back(&best)
}

/// Runs the rules on `expr` and extracts the cheapest term, if cheaper.
fn saturate(
    expr: &RecExpr<IndexLang>,
    analysis: IndexAnalysis,
    leaf_sizes: &[usize],
) -> Option<RecExpr<IndexLang>> {
    let start = TreeSize { leaf_sizes }.cost_rec(expr);
    let runner: Runner<IndexLang, IndexAnalysis> = Runner::new(analysis)
        .with_iter_limit(ITER_LIMIT)
        .with_node_limit(NODE_LIMIT)
        .with_time_limit(NO_TIME_LIMIT)
        .with_expr(expr)
        .with_hook(|runner| {
            // A constant cannot get any smaller.
            match runner.roots.first() {
                Some(&root) if runner.egraph[root].data.range.as_point().is_some() => {
                    Err("constant".to_string())
                }
                _ => Ok(()),
            }
        })
        .run(rules());
    let root = *runner.roots.first()?;
    let extractor = Extractor::new(&runner.egraph, TreeSize { leaf_sizes });
    let (cost, best) = extractor.find_best(root);
    (cost < start).then_some(best)
}
