//! Elementwise nodes: unary functions, Clip, LeakyRelu, Gelu, the broadcast
//! binary operators and the variadic Sum.

use std::f32::consts::FRAC_1_SQRT_2;

use crate::te::{Expr, abs, compute, erf, exp, max, min, pow, select, sigmoid, sqrt, tanh};

use super::super::error::GraphError;
use super::super::ir::{BinaryOp, UnaryOp};
use super::Lowered;
use super::builder::KernelBuilder;

/// `f(x)` for every element of input 0; `registry` names a 2-D registry op
/// computing the same (`relu`, `gelu`).
fn map_unary(
    mut b: KernelBuilder<'_>,
    stage: &str,
    registry: Option<&str>,
    f: impl Fn(Expr) -> Expr,
) -> Result<Lowered, GraphError> {
    let out = b.output_shape()?;
    if let (Some(op), Some((&n, rows))) = (registry, out.split_last())
        && b.registry_elementwise
        && b.input_shape(0)? == out
        && b.scalar_constant(0)?.is_none()
    {
        let m = rows.iter().product();
        return b.registry(op, &[("M", m), ("N", n)], &[0]);
    }
    let x = b.broadcast(0, "x", &out)?;
    let dims = b.dims(&out)?;
    let y = compute(stage, &dims, |ix| f(x.at(ix)));
    b.finish(y)
}

/// A [`UnaryOp`] node.
pub(super) fn unary(b: KernelBuilder<'_>, op: UnaryOp) -> Result<Lowered, GraphError> {
    match op {
        UnaryOp::Relu => map_unary(b, "relu", Some("relu"), |x| max(x, 0.0f32)),
        UnaryOp::Sigmoid => map_unary(b, "sigmoid", None, sigmoid),
        UnaryOp::Tanh => map_unary(b, "tanh", None, tanh),
        UnaryOp::Erf => map_unary(b, "erf", None, erf),
        UnaryOp::Sqrt => map_unary(b, "sqrt", None, sqrt),
        UnaryOp::Exp => map_unary(b, "exp", None, exp),
        UnaryOp::Neg => map_unary(b, "neg", None, |x| -x),
        UnaryOp::Abs => map_unary(b, "abs", None, abs),
        UnaryOp::Reciprocal => map_unary(b, "reciprocal", None, |x| 1.0f32 / x),
    }
}

/// `min(max(x, lo), hi)`, an infinite bound omitted.
pub(super) fn clip(b: KernelBuilder<'_>, lo: f32, hi: f32) -> Result<Lowered, GraphError> {
    map_unary(b, "clip", None, |x| {
        let x = if lo == f32::NEG_INFINITY {
            x
        } else {
            max(x, lo)
        };
        if hi == f32::INFINITY { x } else { min(x, hi) }
    })
}

/// `alpha·x` below 0, `x` from 0 on.
pub(super) fn leaky_relu(b: KernelBuilder<'_>, alpha: f32) -> Result<Lowered, GraphError> {
    map_unary(b, "leaky_relu", None, |x| {
        select(x.lt(0.0f32), &x * alpha, &x)
    })
}

/// `0.5·x·(1 + erf(x/√2))`, or `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
pub(super) fn gelu(b: KernelBuilder<'_>, tanh_form: bool) -> Result<Lowered, GraphError> {
    if tanh_form {
        let k = (2.0f64 / std::f64::consts::PI).sqrt() as f32;
        map_unary(b, "gelu", None, |x| {
            let inner = (&x + &x * &x * &x * 0.044715f32) * k;
            &x * 0.5f32 * (tanh(inner) + 1.0f32)
        })
    } else {
        map_unary(b, "gelu", Some("gelu"), |x| {
            &x * 0.5f32 * (erf(&x * FRAC_1_SQRT_2) + 1.0f32)
        })
    }
}

/// A [`BinaryOp`] node with numpy broadcasting; `Pow` by a literal 2, 0.5
/// or 1 becomes `x·x`, `sqrt(x)` or `x`.
pub(super) fn binary(mut b: KernelBuilder<'_>, op: BinaryOp) -> Result<Lowered, GraphError> {
    let out = b.output_shape()?;
    let lhs = b.broadcast(0, "x0", &out)?;
    let rhs = b.broadcast(1, "x1", &out)?;
    let dims = b.dims(&out)?;
    let stage = match op {
        BinaryOp::Add => "add",
        BinaryOp::Sub => "sub",
        BinaryOp::Mul => "mul",
        BinaryOp::Div => "div",
        BinaryOp::Pow => "pow",
    };
    let y = compute(stage, &dims, |ix| {
        let (a, c) = (lhs.at(ix), rhs.at(ix));
        match op {
            BinaryOp::Add => a + c,
            BinaryOp::Sub => a - c,
            BinaryOp::Mul => a * c,
            BinaryOp::Div => a / c,
            BinaryOp::Pow => match rhs.literal() {
                Some(2.0) => &a * &a,
                Some(0.5) => sqrt(a),
                Some(1.0) => a,
                _ => pow(a, c),
            },
        }
    });
    b.finish(y)
}

/// The broadcast sum of every input.
pub(super) fn sum(mut b: KernelBuilder<'_>) -> Result<Lowered, GraphError> {
    let out = b.output_shape()?;
    if b.node.inputs.is_empty() {
        return Err(GraphError::bad_node(b.node, "Sum needs at least one input"));
    }
    let terms = (0..b.node.inputs.len())
        .map(|i| b.broadcast(i, &format!("x{i}"), &out))
        .collect::<Result<Vec<_>, _>>()?;
    let dims = b.dims(&out)?;
    let y = compute("sum", &dims, |ix| {
        let mut total = terms[0].at(ix);
        for t in &terms[1..] {
            total = total + t.at(ix);
        }
        total
    });
    b.finish(y)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{Case, assert_close, assert_jit_matches, ravel, tabulate};
    use crate::graph::ir::{BinaryOp, Op, UnaryOp};

    type ScalarFn = fn(f64) -> f64;
    type Reference = Box<dyn Fn(f64) -> f64>;
    type IndexedReference<'a> = Box<dyn Fn(usize) -> f64 + 'a>;

    /// The element of an input of shape `shape` that output point `ix` reads
    /// under numpy broadcasting.
    fn broadcast_at(data: &[f64], shape: &[usize], ix: &[usize]) -> f64 {
        let lead = ix.len() - shape.len();
        let at: Vec<usize> = shape
            .iter()
            .enumerate()
            .map(|(j, &e)| if e == 1 { 0 } else { ix[lead + j] })
            .collect();
        data[ravel(&at, shape)]
    }

    fn erf(x: f64) -> f64 {
        // Abramowitz–Stegun 7.1.26 is too coarse; integrate the series instead.
        let mut sum = 0.0;
        let mut term = x;
        let mut n = 0.0;
        while term.abs() > 1e-17 || n < 5.0 {
            sum += term / (2.0 * n + 1.0);
            n += 1.0;
            term *= -x * x / n;
        }
        2.0 / std::f64::consts::PI.sqrt() * sum
    }

    #[test]
    fn unary_ops_follow_their_formulas() {
        let cases: [(UnaryOp, ScalarFn); 9] = [
            (UnaryOp::Relu, |x| x.max(0.0)),
            (UnaryOp::Sigmoid, |x| 1.0 / (1.0 + (-x).exp())),
            (UnaryOp::Tanh, f64::tanh),
            (UnaryOp::Erf, erf),
            (UnaryOp::Sqrt, f64::sqrt),
            (UnaryOp::Exp, f64::exp),
            (UnaryOp::Neg, |x| -x),
            (UnaryOp::Abs, f64::abs),
            (UnaryOp::Reciprocal, |x| 1.0 / x),
        ];
        for (op, f) in cases {
            let mut case = Case::new();
            let shape = [2, 3, 5];
            if matches!(op, UnaryOp::Sqrt | UnaryOp::Reciprocal) {
                case.positive_input("x", &shape);
            } else {
                case.input("x", &shape);
            }
            let node = case.node(Op::Unary(op), &["x"], &shape);
            let (kernel, got) = case.run(&node);
            // Relu of any rank is the registry's, over [rows, last axis].
            let registry = kernel.registry_op.map(|r| r.0);
            let expected = (op == UnaryOp::Relu).then(|| "relu".to_string());
            assert_eq!(registry, expected, "{op:?}");
            let want: Vec<f64> = case.data("x").into_iter().map(f).collect();
            assert_close(&got, &want, 4, op_name(&node.op));
        }
    }

    fn op_name(op: &Op) -> &'static str {
        op.name()
    }

    #[test]
    fn relu_and_gelu_on_matrices_are_the_registry_ops() {
        let mut case = Case::new();
        case.input("x", &[4, 6]);
        let relu = case.node(Op::Unary(UnaryOp::Relu), &["x"], &[4, 6]);
        let (kernel, got) = case.run(&relu);
        assert_eq!(kernel.registry_op, Some(("relu".into(), "M=4,N=6".into())));
        let want: Vec<f64> = case.data("x").iter().map(|x| x.max(0.0)).collect();
        assert_close(&got, &want, 1, "relu");
        let gelu = case.node(Op::Gelu { tanh: false }, &["x"], &[4, 6]);
        let (kernel, got) = case.run(&gelu);
        assert_eq!(kernel.registry_op.map(|r| r.0), Some("gelu".into()));
        let want: Vec<f64> = case
            .data("x")
            .iter()
            .map(|&x| 0.5 * x * (1.0 + erf(x / 2f64.sqrt())))
            .collect();
        assert_close(&got, &want, 4, "gelu");
    }

    #[test]
    fn gelu_both_forms_clip_and_leaky_relu() {
        let shape = [2, 3, 4];
        let mut case = Case::new();
        case.input("x", &shape);
        let x = case.data("x");
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let forms: [(Op, Reference); 5] = [
            (
                Op::Gelu { tanh: false },
                Box::new(|x| 0.5 * x * (1.0 + erf(x / 2f64.sqrt()))),
            ),
            (
                Op::Gelu { tanh: true },
                Box::new(move |x| 0.5 * x * (1.0 + (k * (x + 0.044715 * x * x * x)).tanh())),
            ),
            (
                Op::Clip {
                    min: -0.25,
                    max: 0.5,
                },
                Box::new(|x| x.clamp(-0.25, 0.5)),
            ),
            (
                Op::Clip {
                    min: f32::NEG_INFINITY,
                    max: 0.5,
                },
                Box::new(|x| x.min(0.5)),
            ),
            (
                Op::LeakyRelu { alpha: 0.1 },
                Box::new(|x| if x < 0.0 { 0.1f32 as f64 * x } else { x }),
            ),
        ];
        for (op, f) in forms {
            let node = case.node(op.clone(), &["x"], &shape);
            let (kernel, got) = case.run(&node);
            let registry = kernel.registry_op.map(|r| r.0);
            let expected = matches!(op, Op::Gelu { tanh: false }).then(|| "gelu".to_string());
            assert_eq!(registry, expected, "{op:?}");
            let want: Vec<f64> = x.iter().map(|&v| f(v)).collect();
            assert_close(&got, &want, 8, &format!("{op:?}"));
        }
    }

    fn check_binary(op: BinaryOp, a: &[usize], b: &[usize], out: &[usize], f: fn(f64, f64) -> f64) {
        let mut case = Case::new();
        if op == BinaryOp::Pow {
            case.positive_input("a", a);
        } else {
            case.input("a", a);
        }
        case.positive_input("b", b);
        let node = case.node(Op::Binary(op), &["a", "b"], out);
        let (kernel, got) = case.run(&node);
        assert_eq!(kernel.inputs, ["a", "b"]);
        let (da, db) = (case.data("a"), case.data("b"));
        let want = tabulate(out, |ix| {
            f(broadcast_at(&da, a, ix), broadcast_at(&db, b, ix))
        });
        assert_close(&got, &want, 4, &format!("{op:?} {a:?} {b:?}"));
    }

    #[test]
    fn binary_ops_broadcast_like_numpy() {
        let add: fn(f64, f64) -> f64 = |a, b| a + b;
        check_binary(BinaryOp::Add, &[2, 3, 4], &[2, 3, 4], &[2, 3, 4], add);
        check_binary(BinaryOp::Add, &[2, 3, 4], &[4], &[2, 3, 4], add);
        check_binary(BinaryOp::Sub, &[2, 1, 4], &[3, 1], &[2, 3, 4], |a, b| a - b);
        check_binary(
            BinaryOp::Mul,
            &[1, 5, 1, 1],
            &[2, 5, 3, 3],
            &[2, 5, 3, 3],
            |a, b| a * b,
        );
        check_binary(BinaryOp::Div, &[3, 1], &[1, 7], &[3, 7], |a, b| a / b);
        check_binary(BinaryOp::Pow, &[2, 3], &[3], &[2, 3], |a, b| a.powf(b));
    }

    #[test]
    fn one_element_constants_are_literals() {
        let mut case = Case::new();
        case.input("x", &[2, 5]).positive_input("p", &[2, 5]);
        case.constant("eps", &[], vec![1e-5]);
        case.constant("two", &[1], vec![2.0]);
        case.constant("half", &[1, 1], vec![0.5]);
        case.constant("three", &[], vec![3.0]);
        case.constant("sqrt2", &[], vec![1.5]);
        let x = case.data("x");
        let p = case.data("p");
        let checks: [(BinaryOp, &str, &str, IndexedReference); 6] = [
            (
                BinaryOp::Add,
                "x",
                "eps",
                Box::new(|i| x[i] + 1e-5f32 as f64),
            ),
            (BinaryOp::Pow, "x", "two", Box::new(|i| x[i] * x[i])),
            (BinaryOp::Pow, "p", "half", Box::new(|i| p[i].sqrt())),
            (BinaryOp::Pow, "p", "three", Box::new(|i| p[i].powi(3))),
            (BinaryOp::Div, "x", "sqrt2", Box::new(|i| x[i] / 1.5)),
            (BinaryOp::Sub, "two", "x", Box::new(|i| 2.0 - x[i])),
        ];
        for (op, a, b, f) in checks {
            let node = case.node(Op::Binary(op), &[a, b], &[2, 5]);
            let (kernel, got) = case.run(&node);
            let runtime: Vec<&str> = [a, b].into_iter().filter(|n| n.len() == 1).collect();
            assert_eq!(kernel.inputs, runtime, "{op:?}({a}, {b})");
            let want: Vec<f64> = (0..10).map(&f).collect();
            assert_close(&got, &want, 4, &format!("{op:?}({a}, {b})"));
        }
        // x² is a product, not a call of pow.
        let node = case.node(Op::Binary(BinaryOp::Pow), &["x", "two"], &[2, 5]);
        let text = format!(
            "{:?}",
            case.kernel(&node).dag.outputs()[0]
                .compute_op()
                .map(|c| c.body.clone())
        );
        assert!(!text.contains("pow"), "{text}");
    }

    #[test]
    fn sum_adds_any_number_of_broadcast_inputs() {
        let mut case = Case::new();
        case.input("a", &[2, 3])
            .input("b", &[3])
            .input("c", &[2, 1]);
        let node = case.node(Op::Sum, &["a", "b", "c"], &[2, 3]);
        let (_, got) = case.run(&node);
        let (a, b, c) = (case.data("a"), case.data("b"), case.data("c"));
        let want = tabulate(&[2, 3], |ix| a[ix[0] * 3 + ix[1]] + b[ix[1]] + c[ix[0]]);
        assert_close(&got, &want, 3, "sum");
        let single = case.node(Op::Sum, &["a"], &[2, 3]);
        assert_close(&case.run(&single).1, &a, 1, "sum of one");
    }

    #[test]
    fn shapes_that_do_not_broadcast_are_bad_nodes() {
        let mut case = Case::new();
        case.input("a", &[2, 3]).input("b", &[2]);
        let node = case.node(Op::Binary(BinaryOp::Add), &["a", "b"], &[2, 3]);
        let err = case.lower(&node).err().map(|e| e.to_string());
        assert!(
            err.as_deref()
                .is_some_and(|e| e.contains("does not broadcast")),
            "{err:?}"
        );
    }

    #[test]
    fn broadcast_and_gelu_compile_through_the_jit() {
        let mut case = Case::new();
        case.input("a", &[2, 1, 5]).input("b", &[3, 1]);
        let node = case.node(Op::Binary(BinaryOp::Mul), &["a", "b"], &[2, 3, 5]);
        let kernel = case.kernel(&node);
        assert_jit_matches(&case, &kernel, 2, "mul broadcast");
        let gelu = case.node(Op::Gelu { tanh: true }, &["a"], &[2, 1, 5]);
        assert_jit_matches(&case, &case.kernel(&gelu), 8, "gelu tanh");
    }
}
