//! Every registered operator, evaluated by the reference interpreter, must
//! equal an independent hand-written loop nest on small random inputs.
//!
//! The loops below are written from the spec table at the top of
//! `src/ops/mod.rs` (layouts, argument order, formulas), not from the op
//! definitions. They compute in `f64` from the `f32` inputs; the interpreter's
//! `f32` output must agree to within `1e-5 * max(1, |want|)`.

use tessera::ops;
use tessera::te::{self, DType, HostTensor};

// ---------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------

/// One evaluation of an op: its inputs (as `f64`), output and output shape.
struct Ran {
    label: String,
    inputs: Vec<Vec<f64>>,
    got: Vec<f32>,
    out_shape: Vec<usize>,
}

/// Pairs the op's parameter names with values (given in the same order).
fn named(names: &[&'static str], values: &[usize]) -> Vec<(&'static str, i64)> {
    assert_eq!(names.len(), values.len(), "test bug: names vs values");
    names
        .iter()
        .zip(values)
        .map(|(&n, &v)| (n, i64::try_from(v).expect("small parameter")))
        .collect()
}

/// Builds `op` at `params` (every parameter given explicitly), checks that its
/// inputs have the spec's shapes in argument order, and evaluates it on
/// random inputs seeded from `seed`.
fn run(op: &str, params: &[(&str, i64)], input_shapes: &[&[usize]], seed: u64) -> Ran {
    let spec = ops::find(op).unwrap_or_else(|e| panic!("{e}"));
    let declared: Vec<&str> = spec.params.iter().map(|p| p.name).collect();
    let mut given: Vec<&str> = params.iter().map(|(n, _)| *n).collect();
    let mut sorted_declared = declared.clone();
    given.sort_unstable();
    sorted_declared.sort_unstable();
    assert_eq!(
        given, sorted_declared,
        "{op}: the test must give every declared parameter ({declared:?})"
    );
    let shape = spec.shape(params).unwrap_or_else(|e| panic!("{e}"));
    let label = format!("{op}[{}]", shape.to_text());
    let dag = spec
        .build(&shape)
        .unwrap_or_else(|e| panic!("{label}: {e}"));

    let actual_shapes: Vec<Vec<usize>> = dag
        .inputs()
        .iter()
        .map(|t| t.shape().iter().map(|&d| to_usize(d)).collect())
        .collect();
    let expected_shapes: Vec<Vec<usize>> = input_shapes.iter().map(|s| s.to_vec()).collect();
    assert_eq!(
        actual_shapes,
        expected_shapes,
        "{label}: input shapes (argument order) differ from the spec; input names {:?}",
        dag.inputs().iter().map(|t| t.name()).collect::<Vec<_>>()
    );

    let hosts: Vec<HostTensor> = actual_shapes
        .iter()
        .enumerate()
        .map(|(n, s)| HostTensor::random(s, DType::F32, seed + n as u64))
        .collect();
    let outputs = te::evaluate(&dag, &hosts).unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(outputs.len(), 1, "{label}: expected exactly one output");
    let got = outputs[0]
        .as_f32()
        .unwrap_or_else(|| panic!("{label}: output is not f32"))
        .to_vec();
    let inputs = hosts
        .iter()
        .map(|h| {
            h.as_f32()
                .expect("random f32 input")
                .iter()
                .map(|&v| f64::from(v))
                .collect()
        })
        .collect();
    Ran {
        label,
        inputs,
        got,
        out_shape: outputs[0].shape().to_vec(),
    }
}

fn to_usize(d: i64) -> usize {
    usize::try_from(d).expect("non-negative extent")
}

/// Asserts the output shape and every element, reporting the first mismatch.
fn assert_close(ran: &Ran, want_shape: &[usize], want: &[f64]) {
    assert_eq!(
        ran.out_shape, want_shape,
        "{}: output shape differs from the spec",
        ran.label
    );
    assert_eq!(
        want.len(),
        want_shape.iter().product::<usize>(),
        "test bug: reference length"
    );
    assert_eq!(ran.got.len(), want.len(), "{}: output length", ran.label);
    for (i, (&g, &w)) in ran.got.iter().zip(want).enumerate() {
        let tol = 1e-5 * w.abs().max(1.0);
        let ok = (f64::from(g) - w).abs() <= tol;
        assert!(
            ok,
            "{}: first mismatch at flat index {i} (multi-index {:?} of {:?}): got {g}, want {w} (diff {:e}, tol {tol:e})",
            ran.label,
            unflatten(i, want_shape),
            want_shape,
            (f64::from(g) - w).abs()
        );
    }
}

/// Row-major flat offset of `ix` in `dims` (bounds-checked).
fn flat(dims: &[usize], ix: &[usize]) -> usize {
    assert_eq!(dims.len(), ix.len(), "test bug: rank");
    let mut off = 0;
    for (&d, &i) in dims.iter().zip(ix) {
        assert!(i < d, "test bug: index {ix:?} outside {dims:?}");
        off = off * d + i;
    }
    off
}

fn unflatten(mut i: usize, dims: &[usize]) -> Vec<usize> {
    let mut ix = vec![0; dims.len()];
    for (slot, &d) in ix.iter_mut().zip(dims).rev() {
        *slot = i % d;
        i /= d;
    }
    ix
}

/// Output extent of a window op: `(I + 2*pad - dil*(K-1) - 1) / stride + 1`.
fn out_dim(i: usize, k: usize, stride: usize, pad: usize, dil: usize) -> usize {
    let span = dil * (k - 1) + 1;
    assert!(i + 2 * pad >= span, "test bug: empty output");
    (i + 2 * pad - span) / stride + 1
}

/// Input coordinate `o*stride + k*dil - pad`, if it lies inside `0..extent`.
fn tap(o: usize, stride: usize, k: usize, dil: usize, pad: usize, extent: usize) -> Option<usize> {
    (o * stride + k * dil)
        .checked_sub(pad)
        .filter(|&i| i < extent)
}

// ---------------------------------------------------------------------------
// Registry coverage
// ---------------------------------------------------------------------------

/// The hand-written reference check of each op, by registry name.
fn reference(name: &str) -> Option<fn()> {
    let f: fn() = match name {
        "matmul" => check_matmul,
        "matmul_nt" => check_matmul_nt,
        "batch_matmul" => check_batch_matmul,
        "dense" => check_dense,
        "dense_bias" => check_dense_bias,
        "dense_bias_relu" => check_dense_bias_relu,
        "conv1d" => check_conv1d,
        "conv2d" => check_conv2d,
        "conv2d_bias" => check_conv2d_bias,
        "conv2d_nhwc" => check_conv2d_nhwc,
        "conv2d_nhwc_bias" => check_conv2d_nhwc_bias,
        "group_conv2d" => check_group_conv2d,
        "depthwise_conv2d" => check_depthwise_conv2d,
        "conv3d" => check_conv3d,
        "conv2d_transpose" => check_conv2d_transpose,
        "conv2d_capsule" => check_conv2d_capsule,
        "norm" => check_norm,
        "max_pool2d" => check_max_pool2d,
        "avg_pool2d" => check_avg_pool2d,
        "softmax" => check_softmax,
        "layer_norm" => check_layer_norm,
        "relu" => check_relu,
        "gelu" => check_gelu,
        "bias_add" => check_bias_add,
        "conv2d_bn_relu" => check_conv2d_bn_relu,
        "transpose_batch_matmul" => check_transpose_batch_matmul,
        _ => return None,
    };
    Some(f)
}

/// The ops this file has references for (each must also be registered).
const REFERENCED: &[&str] = &[
    "matmul",
    "matmul_nt",
    "batch_matmul",
    "dense",
    "dense_bias",
    "dense_bias_relu",
    "conv1d",
    "conv2d",
    "conv2d_bias",
    "conv2d_nhwc",
    "conv2d_nhwc_bias",
    "group_conv2d",
    "depthwise_conv2d",
    "conv3d",
    "conv2d_transpose",
    "conv2d_capsule",
    "norm",
    "max_pool2d",
    "avg_pool2d",
    "softmax",
    "layer_norm",
    "relu",
    "gelu",
    "bias_add",
    "conv2d_bn_relu",
    "transpose_batch_matmul",
];

#[test]
fn every_registered_op_has_a_hand_written_reference() {
    let missing: Vec<&str> = ops::registry()
        .iter()
        .map(|op| op.name)
        .filter(|name| reference(name).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "registered ops without a hand-written reference in tests/ops_reference.rs: {missing:?}"
    );
    for name in REFERENCED {
        assert!(reference(name).is_some(), "{name}: listed but no reference");
        assert!(
            ops::find(name).is_ok(),
            "{name}: has a reference but is not registered"
        );
    }
}

// ---------------------------------------------------------------------------
// Linear algebra
// ---------------------------------------------------------------------------

fn check_matmul() {
    for (case, &[m, n, k]) in [[1, 1, 1], [3, 5, 7], [8, 4, 9], [13, 1, 6]]
        .iter()
        .enumerate()
    {
        let params = named(&["M", "N", "K"], &[m, n, k]);
        let ran = run(
            "matmul",
            &params,
            &[&[m, k], &[k, n]],
            100 + 10 * case as u64,
        );
        let (a, b) = (&ran.inputs[0], &ran.inputs[1]);
        let mut want = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for r in 0..k {
                    acc += a[flat(&[m, k], &[i, r])] * b[flat(&[k, n], &[r, j])];
                }
                want[flat(&[m, n], &[i, j])] = acc;
            }
        }
        assert_close(&ran, &[m, n], &want);
    }
}

fn check_matmul_nt() {
    for (case, &[m, n, k]) in [[1, 1, 1], [3, 5, 7], [8, 4, 9], [2, 11, 3]]
        .iter()
        .enumerate()
    {
        let params = named(&["M", "N", "K"], &[m, n, k]);
        let ran = run(
            "matmul_nt",
            &params,
            &[&[m, k], &[n, k]],
            200 + 10 * case as u64,
        );
        let (a, b) = (&ran.inputs[0], &ran.inputs[1]);
        let mut want = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for r in 0..k {
                    acc += a[flat(&[m, k], &[i, r])] * b[flat(&[n, k], &[j, r])];
                }
                want[flat(&[m, n], &[i, j])] = acc;
            }
        }
        assert_close(&ran, &[m, n], &want);
    }
}

fn check_batch_matmul() {
    let cases = [[1, 2, 3, 4], [3, 5, 7, 2], [2, 1, 6, 5], [1, 1, 1, 1]];
    for (case, &[bb, m, n, k]) in cases.iter().enumerate() {
        let params = named(&["B", "M", "N", "K"], &[bb, m, n, k]);
        let ran = run(
            "batch_matmul",
            &params,
            &[&[bb, m, k], &[bb, k, n]],
            300 + 10 * case as u64,
        );
        let (a, b) = (&ran.inputs[0], &ran.inputs[1]);
        let mut want = vec![0.0; bb * m * n];
        for p in 0..bb {
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0.0;
                    for r in 0..k {
                        acc += a[flat(&[bb, m, k], &[p, i, r])] * b[flat(&[bb, k, n], &[p, r, j])];
                    }
                    want[flat(&[bb, m, n], &[p, i, j])] = acc;
                }
            }
        }
        assert_close(&ran, &[bb, m, n], &want);
    }
}

/// `dense` (`bias`: add bias[n]; `relu`: then max with 0).
fn check_dense_family(op: &str, bias: bool, relu: bool, seed: u64) {
    for (case, &[m, n, k]) in [[1, 1, 1], [3, 5, 7], [6, 9, 11], [4, 2, 1]]
        .iter()
        .enumerate()
    {
        let params = named(&["M", "N", "K"], &[m, n, k]);
        let (dshape, wshape, bshape) = ([m, k], [n, k], [n]);
        let shapes: Vec<&[usize]> = if bias {
            vec![&dshape, &wshape, &bshape]
        } else {
            vec![&dshape, &wshape]
        };
        let ran = run(op, &params, &shapes, seed + 10 * case as u64);
        let (data, weight) = (&ran.inputs[0], &ran.inputs[1]);
        let mut want = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0;
                for r in 0..k {
                    acc += data[flat(&[m, k], &[i, r])] * weight[flat(&[n, k], &[j, r])];
                }
                if bias {
                    acc += ran.inputs[2][j];
                }
                if relu {
                    acc = acc.max(0.0);
                }
                want[flat(&[m, n], &[i, j])] = acc;
            }
        }
        assert_close(&ran, &[m, n], &want);
    }
}

fn check_dense() {
    check_dense_family("dense", false, false, 400);
}

fn check_dense_bias() {
    check_dense_family("dense_bias", true, false, 500);
}

fn check_dense_bias_relu() {
    check_dense_family("dense_bias_relu", true, true, 600);
}

fn check_transpose_batch_matmul() {
    let cases = [[1, 3, 2, 4], [2, 5, 3, 7], [1, 1, 1, 1], [3, 4, 1, 2]];
    for (case, &[bb, l, h, d]) in cases.iter().enumerate() {
        let params = named(&["B", "L", "H", "D"], &[bb, l, h, d]);
        let qshape = [bb, l, h, d];
        let ran = run(
            "transpose_batch_matmul",
            &params,
            &[&qshape, &qshape],
            700 + 10 * case as u64,
        );
        let (q, v) = (&ran.inputs[0], &ran.inputs[1]);
        let oshape = [bb, h, l, l];
        let mut want = vec![0.0; bb * h * l * l];
        for b in 0..bb {
            for hh in 0..h {
                for i in 0..l {
                    for j in 0..l {
                        let mut acc = 0.0;
                        for dd in 0..d {
                            acc += q[flat(&qshape, &[b, i, hh, dd])]
                                * v[flat(&qshape, &[b, j, hh, dd])];
                        }
                        want[flat(&oshape, &[b, hh, i, j])] = acc;
                    }
                }
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

// ---------------------------------------------------------------------------
// Convolutions
// ---------------------------------------------------------------------------

fn check_conv1d() {
    // N, C, L, K, R, stride, pad, dilation
    let cases = [
        [1, 1, 5, 1, 1, 1, 0, 1],
        [2, 3, 11, 4, 3, 1, 1, 1],
        [1, 2, 13, 3, 3, 2, 2, 2],
        [2, 3, 7, 2, 5, 2, 0, 1],
        [1, 4, 9, 3, 2, 3, 1, 2],
    ];
    let names = ["N", "C", "L", "K", "R", "stride", "pad", "dilation"];
    for (case, &[n, c, l, k, r, st, pad, dil]) in cases.iter().enumerate() {
        let params = named(&names, &[n, c, l, k, r, st, pad, dil]);
        let dshape = [n, c, l];
        let wshape = [k, c, r];
        let ran = run(
            "conv1d",
            &params,
            &[&dshape, &wshape],
            1000 + 10 * case as u64,
        );
        let (data, weight) = (&ran.inputs[0], &ran.inputs[1]);
        let ol = out_dim(l, r, st, pad, dil);
        let oshape = [n, k, ol];
        let mut want = vec![0.0; n * k * ol];
        for b in 0..n {
            for kk in 0..k {
                for x in 0..ol {
                    let mut acc = 0.0;
                    for cc in 0..c {
                        for rr in 0..r {
                            if let Some(ix) = tap(x, st, rr, dil, pad, l) {
                                acc += data[flat(&dshape, &[b, cc, ix])]
                                    * weight[flat(&wshape, &[kk, cc, rr])];
                            }
                        }
                    }
                    want[flat(&oshape, &[b, kk, x])] = acc;
                }
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

const CONV2D_NAMES: [&str; 10] = [
    "N", "C", "H", "W", "K", "R", "S", "stride", "pad", "dilation",
];

/// N, C, H, W, K, R, S, stride, pad, dilation.
// NHWC convolutions over fewer than 16 channels without dilation reduce
// over a window row at once; the last case has enough channels to keep the
// taps apart.
const CONV2D_CASES: [[usize; 10]; 7] = [
    [1, 3, 7, 6, 4, 3, 2, 2, 1, 1],
    [2, 2, 9, 9, 3, 3, 3, 1, 2, 2],
    [1, 5, 5, 7, 2, 1, 3, 1, 0, 1],
    [2, 3, 8, 5, 2, 2, 3, 3, 1, 1],
    [1, 1, 3, 3, 1, 3, 3, 1, 0, 1],
    [1, 2, 7, 9, 3, 2, 3, 2, 2, 2],
    [1, 17, 5, 6, 3, 3, 2, 1, 1, 1],
];

fn check_conv2d() {
    check_conv2d_with(false);
}

fn check_conv2d_bias() {
    check_conv2d_with(true);
}

/// conv2d, or conv2d_bias (`+ bias[k]`), on every case.
fn check_conv2d_with(with_bias: bool) {
    for (case, &[n, c, h, w, k, r, s, st, pad, dil]) in CONV2D_CASES.iter().enumerate() {
        let params = named(&CONV2D_NAMES, &[n, c, h, w, k, r, s, st, pad, dil]);
        let dshape = [n, c, h, w];
        let wshape = [k, c, r, s];
        let bshape = [k];
        let (op, shapes): (&str, Vec<&[usize]>) = if with_bias {
            ("conv2d_bias", vec![&dshape, &wshape, &bshape])
        } else {
            ("conv2d", vec![&dshape, &wshape])
        };
        let ran = run(op, &params, &shapes, 1100 + 10 * case as u64);
        let (data, weight) = (&ran.inputs[0], &ran.inputs[1]);
        let (oh, ow) = (out_dim(h, r, st, pad, dil), out_dim(w, s, st, pad, dil));
        let oshape = [n, k, oh, ow];
        let mut want = vec![0.0; n * k * oh * ow];
        for b in 0..n {
            for kk in 0..k {
                for y in 0..oh {
                    for x in 0..ow {
                        let mut acc = 0.0;
                        for cc in 0..c {
                            for rr in 0..r {
                                let Some(iy) = tap(y, st, rr, dil, pad, h) else {
                                    continue;
                                };
                                for ss in 0..s {
                                    let Some(ix) = tap(x, st, ss, dil, pad, w) else {
                                        continue;
                                    };
                                    acc += data[flat(&dshape, &[b, cc, iy, ix])]
                                        * weight[flat(&wshape, &[kk, cc, rr, ss])];
                                }
                            }
                        }
                        let bias = if with_bias { ran.inputs[2][kk] } else { 0.0 };
                        want[flat(&oshape, &[b, kk, y, x])] = acc + bias;
                    }
                }
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

/// `conv2d_nhwc` of data[N,H,W,C] and weight[R,S,C,K] into out[N,OH,OW,K].
fn conv2d_nhwc_ref(
    data: &[f64],
    weight: &[f64],
    [n, h, w, c]: [usize; 4],
    [r, s, k]: [usize; 3],
    st: usize,
    pad: usize,
    dil: usize,
) -> (Vec<usize>, Vec<f64>) {
    let dshape = [n, h, w, c];
    let wshape = [r, s, c, k];
    let (oh, ow) = (out_dim(h, r, st, pad, dil), out_dim(w, s, st, pad, dil));
    let oshape = [n, oh, ow, k];
    let mut want = vec![0.0; n * oh * ow * k];
    for b in 0..n {
        for y in 0..oh {
            for x in 0..ow {
                for kk in 0..k {
                    let mut acc = 0.0;
                    for rr in 0..r {
                        let Some(iy) = tap(y, st, rr, dil, pad, h) else {
                            continue;
                        };
                        for ss in 0..s {
                            let Some(ix) = tap(x, st, ss, dil, pad, w) else {
                                continue;
                            };
                            for cc in 0..c {
                                acc += data[flat(&dshape, &[b, iy, ix, cc])]
                                    * weight[flat(&wshape, &[rr, ss, cc, kk])];
                            }
                        }
                    }
                    want[flat(&oshape, &[b, y, x, kk])] = acc;
                }
            }
        }
    }
    (oshape.to_vec(), want)
}

fn check_conv2d_nhwc() {
    check_conv2d_nhwc_with(false);
}

fn check_conv2d_nhwc_bias() {
    check_conv2d_nhwc_with(true);
}

/// conv2d_nhwc, or conv2d_nhwc_bias (`+ bias[k]`), on every case.
fn check_conv2d_nhwc_with(with_bias: bool) {
    for (case, &[n, c, h, w, k, r, s, st, pad, dil]) in CONV2D_CASES.iter().enumerate() {
        let params = named(&CONV2D_NAMES, &[n, c, h, w, k, r, s, st, pad, dil]);
        let (dshape, wshape, bshape) = ([n, h, w, c], [r, s, c, k], [k]);
        let (op, shapes, seed): (&str, Vec<&[usize]>, u64) = if with_bias {
            ("conv2d_nhwc_bias", vec![&dshape, &wshape, &bshape], 1250)
        } else {
            ("conv2d_nhwc", vec![&dshape, &wshape], 1200)
        };
        let ran = run(op, &params, &shapes, seed + 10 * case as u64);
        let (oshape, mut want) = conv2d_nhwc_ref(
            &ran.inputs[0],
            &ran.inputs[1],
            dshape,
            [r, s, k],
            st,
            pad,
            dil,
        );
        if with_bias {
            for (i, v) in want.iter_mut().enumerate() {
                *v += ran.inputs[2][i % k];
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

fn check_conv2d_bn_relu() {
    let names = [
        "N", "H", "W", "C", "K", "R", "S", "stride", "pad", "dilation",
    ];
    // N, H, W, C, K, R, S, stride, pad, dilation
    let cases = [
        [1, 7, 6, 3, 4, 3, 2, 2, 1, 1],
        [2, 9, 9, 2, 3, 3, 3, 1, 2, 2],
        [1, 5, 5, 4, 2, 1, 1, 1, 0, 1],
        [1, 6, 7, 2, 5, 2, 3, 2, 1, 1],
    ];
    for (case, &[n, h, w, c, k, r, s, st, pad, dil]) in cases.iter().enumerate() {
        let params = named(&names, &[n, h, w, c, k, r, s, st, pad, dil]);
        let ran = run(
            "conv2d_bn_relu",
            &params,
            &[&[n, h, w, c], &[r, s, c, k], &[k], &[k], &[k]],
            1300 + 10 * case as u64,
        );
        let (oshape, conv) = conv2d_nhwc_ref(
            &ran.inputs[0],
            &ran.inputs[1],
            [n, h, w, c],
            [r, s, k],
            st,
            pad,
            dil,
        );
        let (bias, scale, offset) = (&ran.inputs[2], &ran.inputs[3], &ran.inputs[4]);
        let want: Vec<f64> = conv
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                let kk = i % k; // K is the innermost output dimension
                ((v + bias[kk]) * scale[kk] + offset[kk]).max(0.0)
            })
            .collect();
        assert_close(&ran, &oshape, &want);
    }
}

fn check_group_conv2d() {
    let names = [
        "N", "C", "H", "W", "K", "R", "S", "stride", "pad", "dilation", "groups",
    ];
    // N, C, H, W, K, R, S, stride, pad, dilation, groups
    let cases = [
        [1, 4, 6, 6, 6, 3, 3, 1, 1, 1, 2],
        [2, 6, 7, 5, 9, 3, 2, 2, 1, 2, 3],
        [1, 3, 5, 5, 3, 1, 1, 1, 0, 1, 3],
        [1, 4, 5, 5, 4, 3, 3, 1, 1, 1, 1],
        [1, 4, 7, 6, 2, 2, 3, 2, 2, 1, 2],
    ];
    for (case, &[n, c, h, w, k, r, s, st, pad, dil, g]) in cases.iter().enumerate() {
        let params = named(&names, &[n, c, h, w, k, r, s, st, pad, dil, g]);
        let cg = c / g;
        let kg = k / g;
        let dshape = [n, c, h, w];
        let wshape = [k, cg, r, s];
        let ran = run(
            "group_conv2d",
            &params,
            &[&dshape, &wshape],
            1400 + 10 * case as u64,
        );
        let (data, weight) = (&ran.inputs[0], &ran.inputs[1]);
        let (oh, ow) = (out_dim(h, r, st, pad, dil), out_dim(w, s, st, pad, dil));
        let oshape = [n, k, oh, ow];
        let mut want = vec![0.0; n * k * oh * ow];
        for b in 0..n {
            for kk in 0..k {
                let group = kk / kg;
                for y in 0..oh {
                    for x in 0..ow {
                        let mut acc = 0.0;
                        for cq in 0..cg {
                            let cc = group * cg + cq;
                            for rr in 0..r {
                                let Some(iy) = tap(y, st, rr, dil, pad, h) else {
                                    continue;
                                };
                                for ss in 0..s {
                                    let Some(ix) = tap(x, st, ss, dil, pad, w) else {
                                        continue;
                                    };
                                    acc += data[flat(&dshape, &[b, cc, iy, ix])]
                                        * weight[flat(&wshape, &[kk, cq, rr, ss])];
                                }
                            }
                        }
                        want[flat(&oshape, &[b, kk, y, x])] = acc;
                    }
                }
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

fn check_depthwise_conv2d() {
    let names = ["N", "C", "H", "W", "R", "S", "stride", "pad", "dilation"];
    // N, C, H, W, R, S, stride, pad, dilation
    let cases = [
        [1, 3, 7, 7, 3, 3, 1, 1, 1],
        [2, 4, 9, 6, 3, 2, 2, 2, 2],
        [1, 2, 5, 8, 1, 3, 2, 0, 1],
        [1, 5, 6, 5, 2, 2, 1, 1, 2],
    ];
    for (case, &[n, c, h, w, r, s, st, pad, dil]) in cases.iter().enumerate() {
        let params = named(&names, &[n, c, h, w, r, s, st, pad, dil]);
        let dshape = [n, c, h, w];
        let wshape = [c, r, s];
        let ran = run(
            "depthwise_conv2d",
            &params,
            &[&dshape, &wshape],
            1500 + 10 * case as u64,
        );
        let (data, weight) = (&ran.inputs[0], &ran.inputs[1]);
        let (oh, ow) = (out_dim(h, r, st, pad, dil), out_dim(w, s, st, pad, dil));
        let oshape = [n, c, oh, ow];
        let mut want = vec![0.0; n * c * oh * ow];
        for b in 0..n {
            for cc in 0..c {
                for y in 0..oh {
                    for x in 0..ow {
                        let mut acc = 0.0;
                        for rr in 0..r {
                            let Some(iy) = tap(y, st, rr, dil, pad, h) else {
                                continue;
                            };
                            for ss in 0..s {
                                let Some(ix) = tap(x, st, ss, dil, pad, w) else {
                                    continue;
                                };
                                acc += data[flat(&dshape, &[b, cc, iy, ix])]
                                    * weight[flat(&wshape, &[cc, rr, ss])];
                            }
                        }
                        want[flat(&oshape, &[b, cc, y, x])] = acc;
                    }
                }
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

fn check_conv3d() {
    let names = [
        "N", "C", "D", "H", "W", "K", "T", "R", "S", "stride", "pad", "dilation",
    ];
    // N, C, D, H, W, K, T, R, S, stride, pad, dilation
    let cases = [
        [1, 2, 5, 5, 5, 3, 3, 3, 3, 1, 1, 1],
        [1, 3, 7, 6, 5, 2, 2, 3, 2, 2, 1, 2],
        [2, 1, 3, 4, 5, 2, 1, 2, 3, 1, 0, 1],
        [1, 2, 4, 5, 6, 2, 3, 2, 1, 2, 2, 1],
    ];
    for (case, &[n, c, d, h, w, k, t, r, s, st, pad, dil]) in cases.iter().enumerate() {
        let params = named(&names, &[n, c, d, h, w, k, t, r, s, st, pad, dil]);
        let dshape = [n, c, d, h, w];
        let wshape = [k, c, t, r, s];
        let ran = run(
            "conv3d",
            &params,
            &[&dshape, &wshape],
            1600 + 10 * case as u64,
        );
        let (data, weight) = (&ran.inputs[0], &ran.inputs[1]);
        let od = out_dim(d, t, st, pad, dil);
        let (oh, ow) = (out_dim(h, r, st, pad, dil), out_dim(w, s, st, pad, dil));
        let oshape = [n, k, od, oh, ow];
        let mut want = vec![0.0; n * k * od * oh * ow];
        for b in 0..n {
            for kk in 0..k {
                for z in 0..od {
                    for y in 0..oh {
                        for x in 0..ow {
                            let mut acc = 0.0;
                            for cc in 0..c {
                                for tt in 0..t {
                                    let Some(iz) = tap(z, st, tt, dil, pad, d) else {
                                        continue;
                                    };
                                    for rr in 0..r {
                                        let Some(iy) = tap(y, st, rr, dil, pad, h) else {
                                            continue;
                                        };
                                        for ss in 0..s {
                                            let Some(ix) = tap(x, st, ss, dil, pad, w) else {
                                                continue;
                                            };
                                            acc += data[flat(&dshape, &[b, cc, iz, iy, ix])]
                                                * weight[flat(&wshape, &[kk, cc, tt, rr, ss])];
                                        }
                                    }
                                }
                            }
                            want[flat(&oshape, &[b, kk, z, y, x])] = acc;
                        }
                    }
                }
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

fn check_conv2d_transpose() {
    let names = ["N", "C", "H", "W", "K", "R", "S", "stride", "pad"];
    // N, C, H, W, K, R, S, stride, pad
    let cases = [
        [1, 2, 3, 3, 3, 3, 3, 1, 0],
        [1, 3, 4, 5, 2, 3, 2, 2, 1],
        [2, 2, 5, 3, 3, 4, 3, 2, 0],
        [1, 2, 4, 4, 2, 5, 5, 2, 2],
        [1, 2, 3, 3, 2, 2, 2, 3, 0],
        [1, 1, 5, 7, 3, 3, 4, 3, 1],
    ];
    for (case, &[n, c, h, w, k, r, s, st, pad]) in cases.iter().enumerate() {
        let params = named(&names, &[n, c, h, w, k, r, s, st, pad]);
        let dshape = [n, c, h, w];
        let wshape = [c, k, r, s];
        let ran = run(
            "conv2d_transpose",
            &params,
            &[&dshape, &wshape],
            1700 + 10 * case as u64,
        );
        let (data, weight) = (&ran.inputs[0], &ran.inputs[1]);
        let oh = (h - 1) * st + r - 2 * pad;
        let ow = (w - 1) * st + s - 2 * pad;
        let oshape = [n, k, oh, ow];
        // Scatter form: every input element times every tap adds into one output.
        let mut want = vec![0.0; n * k * oh * ow];
        for b in 0..n {
            for cc in 0..c {
                for iy in 0..h {
                    for ix in 0..w {
                        let v = data[flat(&dshape, &[b, cc, iy, ix])];
                        for kk in 0..k {
                            for rr in 0..r {
                                let Some(y) = (iy * st + rr).checked_sub(pad).filter(|&y| y < oh)
                                else {
                                    continue;
                                };
                                for ss in 0..s {
                                    let Some(x) =
                                        (ix * st + ss).checked_sub(pad).filter(|&x| x < ow)
                                    else {
                                        continue;
                                    };
                                    want[flat(&oshape, &[b, kk, y, x])] +=
                                        v * weight[flat(&wshape, &[cc, kk, rr, ss])];
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

fn check_conv2d_capsule() {
    let names = ["N", "H", "W", "C", "K", "R", "S", "stride", "pad", "cap"];
    // N, H, W, C, K, R, S, stride, pad, cap
    let cases = [
        [1, 5, 5, 2, 3, 3, 3, 1, 1, 2],
        [1, 6, 7, 3, 2, 3, 2, 2, 0, 3],
        [2, 4, 4, 1, 2, 2, 2, 2, 1, 4],
        [1, 3, 5, 2, 2, 1, 3, 1, 2, 1],
    ];
    for (case, &[n, h, w, c, k, r, s, st, pad, cap]) in cases.iter().enumerate() {
        let params = named(&names, &[n, h, w, c, k, r, s, st, pad, cap]);
        let dshape = [n, h, w, cap, cap, c];
        let wshape = [r, s, cap, cap, c, k];
        let ran = run(
            "conv2d_capsule",
            &params,
            &[&dshape, &wshape],
            1800 + 10 * case as u64,
        );
        let (data, weight) = (&ran.inputs[0], &ran.inputs[1]);
        let (oh, ow) = (out_dim(h, r, st, pad, 1), out_dim(w, s, st, pad, 1));
        let oshape = [n, oh, ow, cap, cap, k];
        let mut want = vec![0.0; n * oh * ow * cap * cap * k];
        for b in 0..n {
            for y in 0..oh {
                for x in 0..ow {
                    for i in 0..cap {
                        for j in 0..cap {
                            for kk in 0..k {
                                let mut acc = 0.0;
                                for rr in 0..r {
                                    let Some(iy) = tap(y, st, rr, 1, pad, h) else {
                                        continue;
                                    };
                                    for ss in 0..s {
                                        let Some(ix) = tap(x, st, ss, 1, pad, w) else {
                                            continue;
                                        };
                                        for q in 0..cap {
                                            for cc in 0..c {
                                                acc += data[flat(&dshape, &[b, iy, ix, i, q, cc])]
                                                    * weight
                                                        [flat(&wshape, &[rr, ss, q, j, cc, kk])];
                                            }
                                        }
                                    }
                                }
                                want[flat(&oshape, &[b, y, x, i, j, kk])] = acc;
                            }
                        }
                    }
                }
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

// ---------------------------------------------------------------------------
// Pools
// ---------------------------------------------------------------------------

const POOL_NAMES: [&str; 8] = ["N", "C", "H", "W", "R", "S", "stride", "pad"];

/// N, C, H, W, R, S, stride, pad (every case has 2*pad <= R and 2*pad <= S).
const POOL_CASES: [[usize; 8]; 6] = [
    [1, 2, 7, 7, 3, 3, 2, 1],
    [2, 3, 6, 5, 2, 3, 1, 0],
    [1, 1, 9, 8, 4, 5, 3, 2],
    [1, 2, 5, 5, 2, 2, 2, 1],
    [1, 1, 5, 5, 1, 1, 1, 0],
    [2, 2, 8, 7, 3, 2, 2, 1],
];

/// Pools `data[N,C,H,W]`; `max`: max over the in-input window positions,
/// otherwise their sum divided by `R*S`.
fn check_pool(op: &str, max: bool, seed: u64) {
    for (case, &[n, c, h, w, r, s, st, pad]) in POOL_CASES.iter().enumerate() {
        assert!(2 * pad <= r && 2 * pad <= s, "test bug: pool padding");
        let params = named(&POOL_NAMES, &[n, c, h, w, r, s, st, pad]);
        let dshape = [n, c, h, w];
        let ran = run(op, &params, &[&dshape], seed + 10 * case as u64);
        let data = &ran.inputs[0];
        let (oh, ow) = (out_dim(h, r, st, pad, 1), out_dim(w, s, st, pad, 1));
        let oshape = [n, c, oh, ow];
        let mut want = vec![0.0; n * c * oh * ow];
        for b in 0..n {
            for cc in 0..c {
                for y in 0..oh {
                    for x in 0..ow {
                        let mut best = f64::NEG_INFINITY;
                        let mut sum = 0.0;
                        let mut inside = 0;
                        for rr in 0..r {
                            let Some(iy) = tap(y, st, rr, 1, pad, h) else {
                                continue;
                            };
                            for ss in 0..s {
                                let Some(ix) = tap(x, st, ss, 1, pad, w) else {
                                    continue;
                                };
                                let v = data[flat(&dshape, &[b, cc, iy, ix])];
                                best = best.max(v);
                                sum += v;
                                inside += 1;
                            }
                        }
                        assert!(inside > 0, "test bug: window entirely in padding");
                        want[flat(&oshape, &[b, cc, y, x])] =
                            if max { best } else { sum / (r * s) as f64 };
                    }
                }
            }
        }
        assert_close(&ran, &oshape, &want);
    }
}

fn check_max_pool2d() {
    check_pool("max_pool2d", true, 1900);
}

fn check_avg_pool2d() {
    check_pool("avg_pool2d", false, 2000);
}

// ---------------------------------------------------------------------------
// Normalization and elementwise
// ---------------------------------------------------------------------------

fn check_norm() {
    for (case, &[bb, m, n]) in [[1, 1, 1], [3, 5, 7], [2, 8, 3], [4, 1, 9]]
        .iter()
        .enumerate()
    {
        let params = named(&["B", "M", "N"], &[bb, m, n]);
        let ran = run("norm", &params, &[&[bb, m, n]], 2100 + 10 * case as u64);
        let a = &ran.inputs[0];
        let mut want = vec![0.0; bb];
        for (b, slot) in want.iter_mut().enumerate() {
            let mut acc = 0.0;
            for i in 0..m {
                for j in 0..n {
                    let v = a[flat(&[bb, m, n], &[b, i, j])];
                    acc += v * v;
                }
            }
            *slot = acc.sqrt();
        }
        assert_close(&ran, &[bb], &want);
    }
}

/// Row shapes (M, N) used by the two-dimensional row-wise and elementwise ops.
const ROW_CASES: [[usize; 2]; 4] = [[1, 1], [3, 5], [7, 13], [2, 32]];

fn check_softmax() {
    for (case, &[m, n]) in ROW_CASES.iter().enumerate() {
        let params = named(&["M", "N"], &[m, n]);
        let ran = run("softmax", &params, &[&[m, n]], 2200 + 10 * case as u64);
        let x = &ran.inputs[0];
        let mut want = vec![0.0; m * n];
        for i in 0..m {
            let mut mx = f64::NEG_INFINITY;
            for j in 0..n {
                mx = mx.max(x[flat(&[m, n], &[i, j])]);
            }
            let mut denom = 0.0;
            for j in 0..n {
                denom += (x[flat(&[m, n], &[i, j])] - mx).exp();
            }
            for j in 0..n {
                want[flat(&[m, n], &[i, j])] = (x[flat(&[m, n], &[i, j])] - mx).exp() / denom;
            }
        }
        assert_close(&ran, &[m, n], &want);
    }
}

fn check_layer_norm() {
    for (case, &[m, n]) in ROW_CASES.iter().enumerate() {
        let params = named(&["M", "N"], &[m, n]);
        let ran = run(
            "layer_norm",
            &params,
            &[&[m, n], &[n], &[n]],
            2300 + 10 * case as u64,
        );
        let (x, gamma, beta) = (&ran.inputs[0], &ran.inputs[1], &ran.inputs[2]);
        let mut want = vec![0.0; m * n];
        for i in 0..m {
            let mut mean = 0.0;
            for j in 0..n {
                mean += x[flat(&[m, n], &[i, j])];
            }
            mean /= n as f64;
            let mut var = 0.0;
            for j in 0..n {
                let d = x[flat(&[m, n], &[i, j])] - mean;
                var += d * d;
            }
            var /= n as f64;
            let inv = 1.0 / (var + 1e-5).sqrt();
            for j in 0..n {
                want[flat(&[m, n], &[i, j])] =
                    (x[flat(&[m, n], &[i, j])] - mean) * inv * gamma[j] + beta[j];
            }
        }
        assert_close(&ran, &[m, n], &want);
    }
}

fn check_relu() {
    for (case, &[m, n]) in ROW_CASES.iter().enumerate() {
        let params = named(&["M", "N"], &[m, n]);
        let ran = run("relu", &params, &[&[m, n]], 2400 + 10 * case as u64);
        let want: Vec<f64> = ran.inputs[0].iter().map(|&v| v.max(0.0)).collect();
        assert_close(&ran, &[m, n], &want);
    }
}

fn check_gelu() {
    for (case, &[m, n]) in ROW_CASES.iter().enumerate() {
        let params = named(&["M", "N"], &[m, n]);
        let ran = run("gelu", &params, &[&[m, n]], 2500 + 10 * case as u64);
        let want: Vec<f64> = ran.inputs[0]
            .iter()
            .map(|&v| 0.5 * v * (1.0 + libm::erf(v / std::f64::consts::SQRT_2)))
            .collect();
        assert_close(&ran, &[m, n], &want);
    }
}

fn check_bias_add() {
    for (case, &[m, n]) in ROW_CASES.iter().enumerate() {
        let params = named(&["M", "N"], &[m, n]);
        let ran = run(
            "bias_add",
            &params,
            &[&[m, n], &[n]],
            2600 + 10 * case as u64,
        );
        let (x, bias) = (&ran.inputs[0], &ran.inputs[1]);
        let mut want = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                want[flat(&[m, n], &[i, j])] = x[flat(&[m, n], &[i, j])] + bias[j];
            }
        }
        assert_close(&ran, &[m, n], &want);
    }
}

// ---------------------------------------------------------------------------
// One test per op
// ---------------------------------------------------------------------------

#[test]
fn matmul_matches_hand_loops() {
    check_matmul();
}

#[test]
fn matmul_nt_matches_hand_loops() {
    check_matmul_nt();
}

#[test]
fn batch_matmul_matches_hand_loops() {
    check_batch_matmul();
}

#[test]
fn dense_matches_hand_loops() {
    check_dense();
}

#[test]
fn dense_bias_matches_hand_loops() {
    check_dense_bias();
}

#[test]
fn dense_bias_relu_matches_hand_loops() {
    check_dense_bias_relu();
}

#[test]
fn conv1d_matches_hand_loops() {
    check_conv1d();
}

#[test]
fn conv2d_matches_hand_loops() {
    check_conv2d();
}

#[test]
fn conv2d_nhwc_matches_hand_loops() {
    check_conv2d_nhwc();
}

#[test]
fn conv2d_nhwc_bias_matches_hand_loops() {
    check_conv2d_nhwc_bias();
}

#[test]
fn group_conv2d_matches_hand_loops() {
    check_group_conv2d();
}

#[test]
fn depthwise_conv2d_matches_hand_loops() {
    check_depthwise_conv2d();
}

#[test]
fn conv3d_matches_hand_loops() {
    check_conv3d();
}

#[test]
fn conv2d_transpose_matches_hand_loops() {
    check_conv2d_transpose();
}

#[test]
fn conv2d_capsule_matches_hand_loops() {
    check_conv2d_capsule();
}

#[test]
fn norm_matches_hand_loops() {
    check_norm();
}

#[test]
fn max_pool2d_matches_hand_loops() {
    check_max_pool2d();
}

#[test]
fn avg_pool2d_matches_hand_loops() {
    check_avg_pool2d();
}

#[test]
fn softmax_matches_hand_loops() {
    check_softmax();
}

#[test]
fn layer_norm_matches_hand_loops() {
    check_layer_norm();
}

#[test]
fn relu_matches_hand_loops() {
    check_relu();
}

#[test]
fn gelu_matches_hand_loops() {
    check_gelu();
}

#[test]
fn bias_add_matches_hand_loops() {
    check_bias_add();
}

#[test]
fn conv2d_bn_relu_matches_hand_loops() {
    check_conv2d_bn_relu();
}

#[test]
fn transpose_batch_matmul_matches_hand_loops() {
    check_transpose_batch_matmul();
}
