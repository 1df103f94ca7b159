//! Random valid DAGs for property tests: elementwise stages and row
//! reductions over a few placeholders, with random expression trees (every
//! arithmetic operator, comparisons and selects, casts, intrinsics,
//! floor division of indices, non-finite constants) and random tensor and
//! axis names.

use rand::RngExt;
use rand::rngs::StdRng;
use tessera::te::{
    self, BinOp, ComputeDag, ComputeOp, DType, Expr, IterKind, Tensor, Var, cast, select,
};

/// A tensor the next stages may read, with how to index it from a stage's
/// row `i` and column `j`.
struct Readable {
    tensor: Tensor,
    /// `[m, n]` (false) or `[m]` (true).
    row_vector: bool,
}

/// The stage being built: its row variable, its column (or reduction)
/// variable, and the tensors it may read.
struct Context<'a> {
    row: Expr,
    col: Expr,
    readable: &'a [Readable],
}

fn pick<'a, T>(rng: &mut StdRng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

fn name(rng: &mut StdRng, stem: &str, n: usize) -> String {
    const SUFFIXES: [&str; 5] = ["", "_a", "x", "_tmp", "2"];
    format!("{stem}{n}{}", pick(rng, &SUFFIXES))
}

/// A random f32 expression of at most `depth` levels.
fn expr(rng: &mut StdRng, cx: &Context, depth: usize) -> Expr {
    if depth == 0 || rng.random_bool(0.25) {
        return leaf(rng, cx);
    }
    let d = depth - 1;
    match rng.random_range(0..9) {
        0..=2 => {
            let op = *pick(
                rng,
                &[BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Min, BinOp::Max],
            );
            let (a, b) = (expr(rng, cx, d), expr(rng, cx, d));
            match op {
                BinOp::Add => a + b,
                BinOp::Sub => a - b,
                BinOp::Mul => a * b,
                BinOp::Min => te::min(a, b),
                _ => te::max(a, b),
            }
        }
        3 => -expr(rng, cx, d),
        4 => {
            let x = expr(rng, cx, d);
            match rng.random_range(0..5) {
                0 => te::tanh(x),
                1 => te::sigmoid(x),
                2 => te::erf(x),
                3 => te::sqrt(te::abs(x)),
                _ => te::abs(x),
            }
        }
        5 => {
            let (a, b) = (expr(rng, cx, d), expr(rng, cx, d));
            let cond = if rng.random_bool(0.5) {
                a.lt(&b)
            } else {
                a.ge(&b)
            };
            let cond = if rng.random_bool(0.3) { !cond } else { cond };
            select(cond, expr(rng, cx, d), expr(rng, cx, d))
        }
        6 => cast(DType::F32, cast(DType::F64, expr(rng, cx, d)) * 0.5_f64),
        7 => {
            // Index arithmetic: floor division and remainder, then a cast.
            let i = cx.row.clone();
            let k = rng.random_range(1..4_i64);
            let int = if rng.random_bool(0.5) {
                te::floordiv(i - 1_i64, k)
            } else {
                te::floormod(i + 2_i64, k)
            };
            cast(DType::F32, int)
        }
        _ => te::pow(te::abs(expr(rng, cx, d)) + 1.0_f32, 0.5_f32),
    }
}

fn leaf(rng: &mut StdRng, cx: &Context) -> Expr {
    match rng.random_range(0..6) {
        0 => Expr::f32(*pick(rng, &[0.0, 1.5, -2.25, 1e-3])),
        1 => Expr::f32(*pick(rng, &[f32::INFINITY, f32::NEG_INFINITY])),
        2 => cast(DType::F32, cx.col.clone()),
        _ => {
            let r = pick(rng, cx.readable);
            if r.row_vector {
                r.tensor.at([&cx.row])
            } else {
                r.tensor.at([&cx.row, &cx.col])
            }
        }
    }
}

/// A random valid DAG over `[m, n]` matrices and `[m]` vectors.
pub fn random_dag(rng: &mut StdRng) -> ComputeDag {
    let (m, n) = (rng.random_range(2..6_i64), rng.random_range(2..6_i64));
    let mut readable = Vec::new();
    let mut inputs = Vec::new();
    for p in 0..rng.random_range(1..4) {
        let row_vector = p > 0 && rng.random_bool(0.3);
        let shape: &[i64] = if row_vector { &[m] } else { &[m, n] };
        let t = te::placeholder(&name(rng, "in", p), shape, DType::F32);
        inputs.push(t.clone());
        readable.push(Readable {
            tensor: t,
            row_vector,
        });
    }
    let mut stages = Vec::new();
    for s in 0..rng.random_range(1..5) {
        let stage_name = name(rng, "s", s);
        let row = Var::new(name(rng, "i", s), m, IterKind::Spatial);
        let (tensor, row_vector) = if rng.random_bool(0.3) {
            // A row reduction over a matrix.
            let k = Var::new(name(rng, "k", s), n, IterKind::Reduce);
            let cx = Context {
                row: row.expr(),
                col: k.expr(),
                readable: &readable,
            };
            let source = expr(rng, &cx, 3);
            let body = match rng.random_range(0..3) {
                0 => te::sum(source, [&k.expr()]),
                1 => te::reduce_max(source, [&k.expr()]),
                _ => te::reduce_min(source, [&k.expr()]),
            };
            let op = ComputeOp {
                axes: vec![row],
                body,
            };
            (Tensor::from_compute(&stage_name, &[m], op), true)
        } else {
            let col = Var::new(name(rng, "j", s), n, IterKind::Spatial);
            let cx = Context {
                row: row.expr(),
                col: col.expr(),
                readable: &readable,
            };
            let body = expr(rng, &cx, 4);
            let op = ComputeOp {
                axes: vec![row, col],
                body,
            };
            (Tensor::from_compute(&stage_name, &[m, n], op), false)
        };
        stages.push(tensor.clone());
        readable.push(Readable { tensor, row_vector });
    }
    let mut outputs = vec![stages[stages.len() - 1].clone()];
    if stages.len() > 1 && rng.random_bool(0.5) {
        outputs.insert(0, stages[0].clone());
    }
    ComputeDag::new(&inputs, &outputs)
        .unwrap_or_else(|e| panic!("the generator made an invalid DAG: {e}"))
}
