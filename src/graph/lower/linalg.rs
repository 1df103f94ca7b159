//! Matrix products: MatMul with numpy semantics (the registry's `matmul`
//! and `batch_matmul` where they fit) and Gemm (`dense`, `dense_bias`,
//! `matmul` where they fit).

use crate::te::{Expr, compute, reduce_axis, sum};

use super::super::error::GraphError;
use super::Lowered;
use super::builder::{KernelBuilder, shape_text};

/// A MatMul node: `[…, M, K] · […, K, N]` with the batch dimensions
/// broadcast; a 1-D left operand is a row `[1, K]` and a 1-D right operand a
/// column `[K, 1]`, the added dimension then dropped from the output.
pub(super) fn matmul(mut b: KernelBuilder<'_>) -> Result<Lowered, GraphError> {
    let a = b.input_shape(0)?;
    let w = b.input_shape(1)?;
    let bad = |b: &KernelBuilder<'_>| {
        GraphError::bad_node(
            b.node,
            format!(
                "operands {} and {} do not multiply (numpy matmul)",
                shape_text(&a),
                shape_text(&w)
            ),
        )
    };
    if a.is_empty() || w.is_empty() {
        return Err(bad(&b));
    }
    let k = a[a.len() - 1];
    let kb = if w.len() == 1 { w[0] } else { w[w.len() - 2] };
    if k != kb {
        return Err(bad(&b));
    }
    match (a.as_slice(), w.as_slice()) {
        // `[…, M, K] · [K, N]`: the leading dimensions are more rows.
        ([rows @ .., k], [_, n]) if !rows.is_empty() => {
            let p = [("M", rows.iter().product()), ("N", *n), ("K", *k)];
            return b.registry("matmul", &p, &[0, 1]);
        }
        // Equal batch dimensions (any number of them) are one batch.
        ([ba @ .., m, k], [bb @ .., _, n]) if ba == bb && !ba.is_empty() => {
            let p = [("B", ba.iter().product()), ("M", *m), ("N", *n), ("K", *k)];
            return b.registry("batch_matmul", &p, &[0, 1]);
        }
        _ => {}
    }
    let a_batch = &a[..a.len().saturating_sub(2)];
    let w_batch = &w[..w.len().saturating_sub(2)];
    let nb = a_batch.len().max(w_batch.len());
    let mut batch = vec![1usize; nb];
    for (shape, offset) in [(a_batch, nb - a_batch.len()), (w_batch, nb - w_batch.len())] {
        for (j, &e) in shape.iter().enumerate() {
            let slot = &mut batch[offset + j];
            if *slot == 1 {
                *slot = e;
            } else if e != 1 && e != *slot {
                return Err(bad(&b));
            }
        }
    }
    let mut out = batch.clone();
    if a.len() > 1 {
        out.push(a[a.len() - 2]);
    }
    if w.len() > 1 {
        out.push(w[w.len() - 1]);
    }
    let lhs = b.tensor(0, "A")?;
    let rhs = b.tensor(1, "B")?;
    let r = reduce_axis(b.dims(&[k])?[0], "k");
    let out_dims = b.dims(&out)?;
    let (a_rank, w_rank) = (a.len(), w.len());
    let c = compute("matmul", &out_dims, |ix| {
        let batch_index = |shape: &[usize]| -> Vec<Expr> {
            let offset = nb - shape.len();
            shape
                .iter()
                .enumerate()
                .map(|(j, &e)| {
                    if e == 1 {
                        Expr::i64(0)
                    } else {
                        ix[offset + j].clone()
                    }
                })
                .collect()
        };
        let m_at = nb;
        let n_at = if a_rank > 1 { nb + 1 } else { nb };
        let mut at_a = batch_index(a_batch);
        if a_rank > 1 {
            at_a.push(ix[m_at].clone());
        }
        at_a.push(r.clone());
        let mut at_b = batch_index(w_batch);
        at_b.push(r.clone());
        if w_rank > 1 {
            at_b.push(ix[n_at].clone());
        }
        sum(lhs.at(at_a) * rhs.at(at_b), [&r])
    });
    b.finish(c)
}

/// A Gemm node: `alpha·op(A)·op(B) + beta·C`, `C` broadcast to `[M, N]`.
pub(super) fn gemm(
    mut b: KernelBuilder<'_>,
    alpha: f32,
    beta: f32,
    trans_a: bool,
    trans_b: bool,
) -> Result<Lowered, GraphError> {
    let a = b.input_shape(0)?;
    let w = b.input_shape(1)?;
    let (Ok([a0, a1]), Ok([w0, w1])) = (
        <[usize; 2]>::try_from(a.as_slice()),
        <[usize; 2]>::try_from(w.as_slice()),
    ) else {
        return Err(GraphError::bad_node(
            b.node,
            format!(
                "Gemm multiplies matrices; the operands are {} and {}",
                shape_text(&a),
                shape_text(&w)
            ),
        ));
    };
    let (m, k) = if trans_a { (a1, a0) } else { (a0, a1) };
    let (kb, n) = if trans_b { (w1, w0) } else { (w0, w1) };
    if k != kb {
        return Err(GraphError::bad_node(
            b.node,
            format!("op(A) is {m}x{k} but op(B) is {kb}x{n} (transA={trans_a}, transB={trans_b})"),
        ));
    }
    let has_c = b.has_input(2) && beta != 0.0;
    let mnk = [("M", m), ("N", n), ("K", k)];
    if !trans_a && alpha == 1.0 {
        if !has_c {
            let op = if trans_b { "dense" } else { "matmul" };
            return b.registry(op, &mnk, &[0, 1]);
        }
        let c = b.input_shape(2)?;
        let bias_row = c == [n] || c == [1, n];
        if trans_b && beta == 1.0 && bias_row && b.scalar_constant(2)?.is_none() {
            return b.registry("dense_bias", &mnk, &[0, 1, 2]);
        }
    }
    let lhs = b.tensor(0, "A")?;
    let rhs = b.tensor(1, "B")?;
    let out = [m, n];
    let bias = if has_c {
        Some(b.broadcast(2, "C", &out)?)
    } else {
        None
    };
    let dims = b.dims(&out)?;
    let r = reduce_axis(b.dims(&[k])?[0], "k");
    let product = compute("matmul", &dims, |ix| {
        let at_a = if trans_a {
            vec![r.clone(), ix[0].clone()]
        } else {
            vec![ix[0].clone(), r.clone()]
        };
        let at_b = if trans_b {
            vec![ix[1].clone(), r.clone()]
        } else {
            vec![r.clone(), ix[1].clone()]
        };
        sum(lhs.at(at_a) * rhs.at(at_b), [&r])
    });
    if alpha == 1.0 && bias.is_none() {
        return b.finish(product);
    }
    let y = compute("gemm", &dims, |ix| {
        let p = product.at(ix);
        let scaled = if alpha == 1.0 { p } else { p * alpha };
        match &bias {
            None => scaled,
            Some(c) if beta == 1.0 => scaled + c.at(ix),
            Some(c) => scaled + c.at(ix) * beta,
        }
    });
    b.finish(y)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{Case, assert_close, assert_jit_matches, ravel, tabulate};
    use crate::graph::ir::Op;

    /// numpy matmul as loops over the broadcast output.
    fn reference(a: &[f64], sa: &[usize], b: &[f64], sb: &[usize], out: &[usize]) -> Vec<f64> {
        let pa: Vec<usize> = if sa.len() == 1 {
            vec![1, sa[0]]
        } else {
            sa.to_vec()
        };
        let pb: Vec<usize> = if sb.len() == 1 {
            vec![sb[0], 1]
        } else {
            sb.to_vec()
        };
        let k = pa[pa.len() - 1];
        let nb = pa.len().max(pb.len()) - 2;
        // The output with the promoted dimensions put back.
        let mut full = out[..nb].to_vec();
        full.push(pa[pa.len() - 2]);
        full.push(pb[pb.len() - 1]);
        tabulate(&full, |o| {
            let pick = |shape: &[usize], row: usize, col: usize| -> Vec<usize> {
                let batch = shape.len() - 2;
                let mut at: Vec<usize> = (0..batch)
                    .map(|j| if shape[j] == 1 { 0 } else { o[nb - batch + j] })
                    .collect();
                at.push(row);
                at.push(col);
                at
            };
            (0..k)
                .map(|r| {
                    a[ravel(&pick(&pa, o[nb], r), &pa)] * b[ravel(&pick(&pb, r, o[nb + 1]), &pb)]
                })
                .sum()
        })
    }

    fn check(sa: &[usize], sb: &[usize], out: &[usize], jit: bool) -> Option<String> {
        let mut case = Case::new();
        case.input("a", sa).input("b", sb);
        let node = case.node(Op::MatMul, &["a", "b"], out);
        let (kernel, got) = case.run(&node);
        let want = reference(&case.data("a"), sa, &case.data("b"), sb, out);
        let k = sa[sa.len() - 1];
        assert_close(&got, &want, k, &format!("matmul {sa:?}·{sb:?}"));
        if jit {
            assert_jit_matches(&case, &kernel, k, "matmul");
        }
        kernel.registry_op.map(|r| format!("{}[{}]", r.0, r.1))
    }

    #[test]
    fn matmul_uses_the_registry_for_matrices_and_equal_batches() {
        assert_eq!(
            check(&[3, 4], &[4, 5], &[3, 5], false),
            Some("matmul[M=3,N=5,K=4]".into())
        );
        assert_eq!(
            check(&[2, 3, 4], &[2, 4, 5], &[2, 3, 5], false),
            Some("batch_matmul[B=2,M=3,N=5,K=4]".into())
        );
        // Attention's [batch, heads, …] products are one batch of B·H.
        assert_eq!(
            check(&[2, 3, 5, 4], &[2, 3, 4, 6], &[2, 3, 5, 6], true),
            Some("batch_matmul[B=6,M=5,N=6,K=4]".into())
        );
    }

    #[test]
    fn matmul_broadcasts_and_promotes_vectors() {
        // Leading dimensions of A against a matrix B are more rows.
        assert_eq!(
            check(&[2, 3, 4], &[4, 5], &[2, 3, 5], true),
            Some("matmul[M=6,N=5,K=4]".into())
        );
        assert_eq!(check(&[2, 1, 3, 4], &[3, 4, 2], &[2, 3, 3, 2], false), None);
        assert_eq!(check(&[4], &[2, 4, 3], &[2, 3], false), None);
        assert_eq!(check(&[2, 3, 4], &[4], &[2, 3], false), None);
        assert_eq!(check(&[4], &[4], &[], true), None);
    }

    struct Gemm {
        alpha: f32,
        beta: f32,
        trans_a: bool,
        trans_b: bool,
    }

    fn check_gemm(
        g: &Gemm,
        m: usize,
        n: usize,
        k: usize,
        c: Option<&[usize]>,
        jit: bool,
    ) -> Option<String> {
        let mut case = Case::new();
        let sa = if g.trans_a { [k, m] } else { [m, k] };
        let sb = if g.trans_b { [n, k] } else { [k, n] };
        case.input("a", &sa).random_constant("b", &sb);
        let mut inputs = vec!["a", "b"];
        if let Some(sc) = c {
            case.random_constant("c", sc);
            inputs.push("c");
        }
        let op = Op::Gemm {
            alpha: g.alpha,
            beta: g.beta,
            trans_a: g.trans_a,
            trans_b: g.trans_b,
        };
        let node = case.node(op, &inputs, &[m, n]);
        let (kernel, got) = case.run(&node);
        let (a, b, cv) = (case.data("a"), case.data("b"), case.data("c"));
        let want = tabulate(&[m, n], |o| {
            let mut p = 0.0;
            for r in 0..k {
                let av = if g.trans_a {
                    a[r * m + o[0]]
                } else {
                    a[o[0] * k + r]
                };
                let bv = if g.trans_b {
                    b[o[1] * k + r]
                } else {
                    b[r * n + o[1]]
                };
                p += av * bv;
            }
            let bias = c.map_or(0.0, |sc| {
                let lead = 2 - sc.len();
                let at: Vec<usize> = sc
                    .iter()
                    .enumerate()
                    .map(|(j, &e)| if e == 1 { 0 } else { o[lead + j] })
                    .collect();
                cv[ravel(&at, sc)]
            });
            f64::from(g.alpha) * p + f64::from(g.beta) * bias
        });
        assert_close(&got, &want, k + 2, "gemm");
        if jit {
            assert_jit_matches(&case, &kernel, k + 2, "gemm");
        }
        kernel.registry_op.map(|r| r.0)
    }

    #[test]
    fn gemm_is_dense_or_matmul_where_it_fits() {
        let plain = |trans_b| Gemm {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b,
        };
        assert_eq!(
            check_gemm(&plain(true), 3, 5, 4, None, false),
            Some("dense".into())
        );
        assert_eq!(
            check_gemm(&plain(true), 3, 5, 4, Some(&[5]), false),
            Some("dense_bias".into())
        );
        assert_eq!(
            check_gemm(&plain(true), 3, 5, 4, Some(&[1, 5]), false),
            Some("dense_bias".into())
        );
        assert_eq!(
            check_gemm(&plain(false), 3, 5, 4, None, false),
            Some("matmul".into())
        );
    }

    #[test]
    fn gemm_with_transposes_scales_and_broadcast_c_is_built_with_te() {
        let g = Gemm {
            alpha: 0.5,
            beta: 2.0,
            trans_a: true,
            trans_b: true,
        };
        assert_eq!(check_gemm(&g, 3, 5, 4, Some(&[3, 1]), true), None);
        let g = Gemm {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
        };
        assert_eq!(check_gemm(&g, 3, 5, 4, Some(&[3, 5]), false), None);
        let g = Gemm {
            alpha: 1.5,
            beta: 1.0,
            trans_a: true,
            trans_b: false,
        };
        assert_eq!(check_gemm(&g, 2, 3, 6, None, false), None);
        let g = Gemm {
            alpha: 1.0,
            beta: 0.5,
            trans_a: false,
            trans_b: true,
        };
        assert_eq!(check_gemm(&g, 2, 3, 6, Some(&[1]), false), None);
    }
}
