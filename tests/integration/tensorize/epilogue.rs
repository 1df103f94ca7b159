//! Fused epilogues: the elementwise consumer of a micro-kernel tile (a bias
//! per row or per column, a residual, a ReLU or a clip) stored through the
//! call instead of a second pass over the tile, for every kernel here and
//! edge tiles in both directions, through the IR interpreter and the JIT;
//! consumers outside the pattern stay as they were, and still compute the
//! reference.

use super::*;

use super::step::{check_calls, steps};
use tessera::schedule::Step;
use tessera::te::{self, ComputeDag, DType, Expr, max, min, reduce_axis, sum};
use tessera::tir::{self, Stmt};

/// What `out` computes from a product's element, `bias[i]` and `res[i, j]`.
type Consumer = fn(Expr, Expr, Expr) -> Expr;

/// `out = consumer(A·B, bias[i], res[i, j])` over an `m×n` product of depth `k`.
fn product_then(
    (m, n, k): (i64, i64, i64),
    consumer: impl Fn(Expr, Expr, Expr) -> Expr,
) -> ComputeDag {
    let a = te::placeholder("A", &[m, k], DType::F32);
    let b = te::placeholder("B", &[k, n], DType::F32);
    let bias = te::placeholder("bias", &[m], DType::F32);
    let res = te::placeholder("res", &[m, n], DType::F32);
    let r = reduce_axis(k, "k");
    let c = te::compute("C", &[m, n], |ix| {
        sum(a.at([&ix[0], &r]) * b.at([&r, &ix[1]]), [&r])
    });
    let out = te::compute("out", &[m, n], |ix| {
        consumer(
            c.at([&ix[0], &ix[1]]),
            bias.at([&ix[0]]),
            res.at([&ix[0], &ix[1]]),
        )
    });
    ComputeDag::new(&[a, b, bias, res], &[out]).unwrap_or_else(|e| panic!("{e}"))
}

/// A ResNet block as a matrix product: `relu((A·B + bias[i]) + res[i, j])`.
fn residual_relu(shape: (i64, i64, i64)) -> ComputeDag {
    product_then(shape, |c, bias, res| max((c + bias) + res, 0.0f32))
}

/// The model tasks' schedule: `out` tiled `mt × nt`, the product computed
/// per tile and tensorized with `kernel`.
fn tiled(mt: usize, nt: usize, kernel: &str) -> Vec<Step> {
    steps(&format!(
        r#"[
        {{"kind":"split","stage":"out","iter":"i0","factors":[{mt}]}},
        {{"kind":"split","stage":"out","iter":"i1","factors":[{nt}]}},
        {{"kind":"reorder","stage":"out","order":["i1.0","i0.0","i0.1","i1.1"]}},
        {{"kind":"compute_at","stage":"C","target":"out","iter":"i0.0"}},
        {{"kind":"reorder","stage":"C","order":["k","i0","i1"]}},
        {{"kind":"tensorize","stage":"C","iter":"k","intrinsic":"{kernel}"}},
        {{"kind":"annotate","stage":"out","iter":"i1.1","annotation":"vectorize"}},
        {{"kind":"annotate","stage":"out","iter":"i1.0","annotation":"parallel"}}
    ]"#
    ))
}

/// The epilogues of the lowered function's calls, and its stores.
fn epilogues(dag: &ComputeDag, steps: &[Step]) -> (Vec<Option<tir::KernelEpilogue>>, usize) {
    let state = tessera::schedule::State::replay(dag, steps).unwrap_or_else(|e| panic!("{e}"));
    let func = tir::lower(&state).unwrap_or_else(|e| panic!("{e}"));
    let (mut found, mut stores) = (Vec::new(), 0);
    func.body.visit(&mut |s| match s {
        Stmt::MicroKernelCall(call) => found.push(call.epilogue.clone()),
        Stmt::Store { .. } => stores += 1,
        _ => {}
    });
    (found, stores)
}

/// Checks the IR interpreter and the JIT against the reference, with one
/// call lowered with an epilogue.
fn check_fused(label: &str, dag: &ComputeDag, schedule: &[Step]) {
    check_calls(
        &host(),
        label,
        dag,
        schedule,
        "one call with an epilogue",
        |s, n| n + usize::from(matches!(s, Stmt::MicroKernelCall(c) if c.epilogue.is_some())),
        |n| n == 1,
    );
}

#[test]
fn a_bias_a_residual_and_a_relu_are_stored_through_every_kernel() {
    for kernel in coverage().kernels() {
        let (mr, nr) = (kernel.mr, kernel.nr);
        // Edge tiles in both directions, and a depth no kernel unrolls evenly.
        let shape = (2 * mr as i64 + 3, nr as i64 + 5, 19);
        let dag = residual_relu(shape);
        let schedule = tiled(mr, nr, kernel.name);
        let (found, stores) = epilogues(&dag, &schedule);
        let [Some(epilogue)] = found.as_slice() else {
            panic!(
                "{}: one call with an epilogue, found {found:?}",
                kernel.name
            );
        };
        assert_eq!(stores, 0, "{}: no pass over the tile is left", kernel.name);
        let strides: Vec<(i64, i64)> = epilogue
            .addends
            .iter()
            .map(|a| (a.row_stride, a.col_stride))
            .collect();
        assert_eq!(
            strides,
            [(1, 0), (shape.1, 1)],
            "{}: bias, then residual",
            kernel.name
        );
        assert_eq!((epilogue.lower, epilogue.upper), (Some(0.0), None));
        check_fused(
            &format!("{} residual relu {shape:?}", kernel.name),
            &dag,
            &schedule,
        );
    }
}

#[test]
fn a_clip_after_a_bias_written_first_is_fused() {
    let kernel = coverage().kernels()[0];
    let (mr, nr) = (kernel.mr, kernel.nr);
    let shape = (3 * mr as i64 + 1, 2 * nr as i64 + 1, 7);
    let dag = product_then(shape, |c, bias, _| min(max(bias + c, -0.25f32), 0.25f32));
    let schedule = tiled(mr, nr, kernel.name);
    let (found, stores) = epilogues(&dag, &schedule);
    let [Some(epilogue)] = found.as_slice() else {
        panic!("one fused call, found {found:?}");
    };
    assert_eq!(stores, 0);
    assert_eq!(epilogue.addends.len(), 1);
    assert_eq!((epilogue.lower, epilogue.upper), (Some(-0.25), Some(0.25)));
    check_fused("clip(bias + C)", &dag, &schedule);
}

#[test]
fn consumers_outside_the_pattern_keep_their_loop_and_compute_the_reference() {
    let kernel = coverage().kernels()[0];
    let (mr, nr) = (kernel.mr, kernel.nr);
    let shape = (2 * mr as i64 + 1, nr as i64 + 3, 5);
    let cases: [(&str, Consumer); 4] = [
        ("a product", |c, bias, _| c * 2.0f32 + bias),
        ("min before max", |c, _, _| max(min(c, 6.0f32), 0.0f32)),
        ("a clamp between the addends", |c, bias, res| {
            max(c + bias, 0.0f32) + res
        }),
        ("a sum of addends first", |c, bias, res| c + (bias + res)),
    ];
    for (label, consumer) in cases {
        let dag = product_then(shape, consumer);
        let schedule = tiled(mr, nr, kernel.name);
        let (found, stores) = epilogues(&dag, &schedule);
        assert!(
            found.len() == 1 && found[0].is_none() && stores > 0,
            "{label}: not fused, found {found:?} and {stores} stores"
        );
        check_calls(
            &host(),
            label,
            &dag,
            &schedule,
            "one call without an epilogue",
            |s, n| n + usize::from(matches!(s, Stmt::MicroKernelCall(c) if c.epilogue.is_none())),
            |n| n == 1,
        );
    }
}
