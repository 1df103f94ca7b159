//! Shape arithmetic of the import: axes, broadcasting, windows, products.
//! Each returns the reason as text; the caller names the node.

/// `axis` (negative counts from the end) as an index below `rank`.
pub(super) fn axis(axis: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if !(0..r).contains(&a) {
        return Err(format!(
            "axis {axis} is out of range for a tensor of rank {rank} (valid: {}..={})",
            -r,
            r - 1
        ));
    }
    Ok(a as usize)
}

/// The numpy broadcast of `shapes`.
pub(super) fn broadcast(shapes: &[&[usize]]) -> Result<Vec<usize>, String> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for shape in shapes {
        let offset = rank - shape.len();
        for (i, &d) in shape.iter().enumerate() {
            let o = &mut out[offset + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(format!(
                    "shapes {:?} do not broadcast (dimension {} is {} in one and {d} in another)",
                    shapes,
                    offset + i,
                    *o
                ));
            }
        }
    }
    Ok(out)
}

/// The output length of a window of `extent` (dilated) sliding over `input`
/// padded by `pads` (both sides together) with `stride`; `ceil` rounds up
/// but never starts a window inside the end padding only.
pub(super) fn window_out(
    input: usize,
    extent: i64,
    stride: i64,
    pad_begin: i64,
    pad_end: i64,
    ceil: bool,
) -> Result<usize, String> {
    let span = input as i64 + pad_begin + pad_end - extent;
    if span < 0 || stride < 1 {
        return Err(format!(
            "a window of {extent} (stride {stride}) does not fit an input of {input} padded by {pad_begin}+{pad_end}"
        ));
    }
    let mut out = if ceil {
        (span + stride - 1) / stride + 1
    } else {
        span / stride + 1
    };
    if ceil && (out - 1) * stride >= input as i64 + pad_begin {
        out -= 1;
    }
    Ok(out as usize)
}

/// Pads for `auto_pad` SAME_UPPER / SAME_LOWER: output `ceil(input/stride)`.
pub(super) fn same_pads(input: usize, extent: i64, stride: i64, upper: bool) -> (i64, i64) {
    let out = (input as i64 + stride - 1) / stride;
    let total = ((out - 1) * stride + extent - input as i64).max(0);
    let small = total / 2;
    if upper {
        (small, total - small)
    } else {
        (total - small, small)
    }
}

/// The shape of numpy `matmul(a, b)`.
pub(super) fn matmul(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul operands must have at least one dimension".to_string());
    }
    let a2: Vec<usize> = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2: Vec<usize> = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (kb, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != kb {
        return Err(format!(
            "the inner dimensions differ: {a:?} · {b:?} ({k} ≠ {kb})"
        ));
    }
    let mut out = broadcast(&[&a2[..a2.len() - 2], &b2[..b2.len() - 2]])?;
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

/// `shape` with a Reshape target applied (`0` copies, `-1` infers).
pub(super) fn reshape(
    shape: &[usize],
    target: &[i64],
    allow_zero: bool,
) -> Result<Vec<usize>, String> {
    let total: usize = shape.iter().product();
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &t) in target.iter().enumerate() {
        match t {
            -1 if infer.is_none() => {
                infer = Some(i);
                out.push(1);
            }
            -1 => return Err(format!("the target shape {target:?} has two -1 entries")),
            0 if !allow_zero => match shape.get(i) {
                Some(&d) => out.push(d),
                None => {
                    return Err(format!(
                        "the target shape {target:?} copies dimension {i} (0), which the input {shape:?} lacks"
                    ));
                }
            },
            t if t >= 0 => out.push(t as usize),
            t => return Err(format!("the target shape {target:?} has the entry {t}")),
        }
    }
    if let Some(i) = infer {
        let known: usize = out.iter().product();
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!(
                "cannot infer the -1 of {target:?} for {total} elements (input {shape:?})"
            ));
        }
        out[i] = total / known;
    }
    if out.iter().product::<usize>() != total {
        return Err(format!(
            "the target shape {target:?} holds {} elements, the input {shape:?} {total}",
            out.iter().product::<usize>()
        ));
    }
    Ok(out)
}

/// The `(start, step, length)` of a Slice along a dimension of `dim`
/// elements, with ONNX's clamping.
pub(super) fn slice(
    dim: usize,
    start: i64,
    end: i64,
    step: i64,
) -> Result<(i64, i64, usize), String> {
    if step == 0 {
        return Err("a Slice step is 0".to_string());
    }
    let d = dim as i64;
    let resolve = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (start, end) = (resolve(start), resolve(end));
    let (start, end) = if step > 0 {
        (start.clamp(0, d), end.clamp(0, d))
    } else {
        (start.clamp(0, d - 1), end.clamp(-1, d - 1))
    };
    let len = if step > 0 {
        ((end - start + step - 1) / step).max(0)
    } else {
        ((start - end - step - 1) / -step).max(0)
    };
    Ok((start, step, len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(broadcast(&[&[2, 3, 4, 5], &[5]]).unwrap(), vec![2, 3, 4, 5]);
        assert_eq!(
            broadcast(&[&[3, 1, 5], &[2, 1, 4, 1]]).unwrap(),
            vec![2, 3, 4, 5]
        );
        assert_eq!(broadcast(&[&[], &[7]]).unwrap(), vec![7]);
        assert!(broadcast(&[&[3], &[4]]).is_err());
    }

    #[test]
    fn windows_round_as_onnx_does() {
        assert_eq!(window_out(56, 3, 1, 1, 1, false).unwrap(), 56);
        assert_eq!(window_out(112, 3, 2, 0, 0, true).unwrap(), 56);
        assert_eq!(window_out(7, 2, 2, 0, 0, true).unwrap(), 4);
        // The last window would start in the end padding only: dropped.
        assert_eq!(window_out(4, 2, 2, 0, 1, true).unwrap(), 2);
        assert_eq!(same_pads(7, 3, 2, true), (1, 1));
        assert_eq!(same_pads(8, 3, 2, true), (0, 1));
        assert_eq!(same_pads(8, 3, 2, false), (1, 0));
    }

    #[test]
    fn matmul_and_reshape_shapes() {
        assert_eq!(matmul(&[2, 3, 5, 7], &[7, 4]).unwrap(), vec![2, 3, 5, 4]);
        assert_eq!(matmul(&[7], &[7, 4]).unwrap(), vec![4]);
        assert_eq!(matmul(&[3, 7], &[7]).unwrap(), vec![3]);
        assert!(matmul(&[3, 7], &[6, 2]).is_err());
        assert_eq!(reshape(&[2, 3, 4], &[0, -1], false).unwrap(), vec![2, 12]);
        assert!(reshape(&[2, 3, 4], &[5, -1], false).is_err());
    }

    #[test]
    fn slices_clamp() {
        assert_eq!(slice(10, 1, 1000, 2).unwrap(), (1, 2, 5));
        assert_eq!(slice(10, -1, i64::MIN, -1).unwrap(), (9, -1, 10));
        assert_eq!(slice(10, 8, 2, -3).unwrap(), (8, -3, 2));
        assert_eq!(slice(10, 5, 2, 1).unwrap(), (5, 1, 0));
    }
}
