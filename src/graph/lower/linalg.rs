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
        ([m, k], [_, n]) => {
            let p = [("M", *m), ("N", *n), ("K", *k)];
            return b.registry("matmul", &p, &[0, 1]);
        }
        ([ba, m, k], [bb, _, n]) if ba == bb => {
            let p = [("B", *ba), ("M", *m), ("N", *n), ("K", *k)];
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
                .map(|(j, &e)| if e == 1 { Expr::i64(0) } else { ix[offset + j].clone() })
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
    let (Ok([a0, a1]), Ok([w0, w1])) = (<[usize; 2]>::try_from(a.as_slice()), <[usize; 2]>::try_from(w.as_slice())) else {
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
            format!(
                "op(A) is {m}x{k} but op(B) is {kb}x{n} (transA={trans_a}, transB={trans_b})"
            ),
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
