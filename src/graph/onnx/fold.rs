//! Folding at import: nodes whose inputs are all constants and whose op
//! moves or combines values cheaply (the shape subgraphs exporters write:
//! Shape → Gather → Unsqueeze → Concat → Reshape, and arithmetic on them)
//! are evaluated on the host. Integers stay integers.

use std::collections::BTreeMap;

use crate::graph::ir::{BinaryOp, Op};
use crate::te::{DType, HostData, HostTensor};

/// Values of one tensor, as the wide type of their class.
enum Wide {
    Int(Vec<i64>, DType),
    Float(Vec<f64>, DType),
}

fn widen(t: &HostTensor) -> Wide {
    match t.data() {
        HostData::I64(v) => Wide::Int(v.clone(), DType::I64),
        HostData::I32(v) => Wide::Int(v.iter().map(|&x| i64::from(x)).collect(), DType::I32),
        HostData::Bool(v) => Wide::Int(v.iter().map(|&x| i64::from(x)).collect(), DType::Bool),
        HostData::F32(v) => Wide::Float(v.iter().map(|&x| f64::from(x)).collect(), DType::F32),
        HostData::F64(v) => Wide::Float(v.clone(), DType::F64),
    }
}

fn narrow(shape: &[usize], w: Wide) -> Result<HostTensor, String> {
    let data = match w {
        Wide::Int(v, DType::I32) => HostData::I32(v.into_iter().map(|x| x as i32).collect()),
        Wide::Int(v, DType::Bool) => HostData::Bool(v.into_iter().map(|x| x != 0).collect()),
        Wide::Int(v, _) => HostData::I64(v),
        Wide::Float(v, DType::F64) => HostData::F64(v),
        Wide::Float(v, _) => HostData::F32(v.into_iter().map(|x| x as f32).collect()),
    };
    HostTensor::new(shape, data).map_err(|e| e.to_string())
}

/// Picks elements: `out[i] = in[source(i)]`, keeping the type.
fn pick(
    t: &HostTensor,
    shape: &[usize],
    source: impl Fn(usize) -> usize,
) -> Result<HostTensor, String> {
    let n: usize = shape.iter().product();
    let w = match widen(t) {
        Wide::Int(v, d) => Wide::Int((0..n).map(|i| v[source(i)]).collect(), d),
        Wide::Float(v, d) => Wide::Float((0..n).map(|i| v[source(i)]).collect(), d),
    };
    narrow(shape, w)
}

/// A tensor of `shape` filled with the one value of `fill`.
pub(super) fn filled(shape: &[usize], fill: &HostTensor) -> Result<HostTensor, String> {
    if fill.len() != 1 {
        return Err(format!("the fill value has {} elements, not 1", fill.len()));
    }
    pick(fill, shape, |_| 0)
}

/// `value` converted to ONNX data type `to`.
pub(super) fn cast(value: &HostTensor, to: i64) -> Result<HostTensor, String> {
    let dtype = match to {
        1 => DType::F32,
        11 => DType::F64,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        other => {
            return Err(format!(
                "a Cast to ONNX type {other} (supported: 1, 6, 7, 9, 11)"
            ));
        }
    };
    let shape = value.shape();
    let w = match (widen(value), dtype.is_float()) {
        (Wide::Int(v, _), true) => Wide::Float(v.into_iter().map(|x| x as f64).collect(), dtype),
        (Wide::Float(v, _), true) => Wide::Float(v, dtype),
        (Wide::Int(v, _), false) => Wide::Int(v, dtype),
        (Wide::Float(v, _), false) => Wide::Int(v.into_iter().map(|x| x as i64).collect(), dtype),
    };
    narrow(shape, w)
}

/// Row-major strides of `shape`.
fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The multi-index of flat position `flat` in `shape`.
fn unflatten(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d].max(1);
        flat /= shape[d].max(1);
    }
    idx
}

/// Evaluates `op` on constant inputs when it is one the import folds;
/// `None` leaves the node to run as a kernel.
pub(super) fn evaluate(
    op: &Op,
    inputs: &[String],
    out_shape: &[usize],
    constants: &BTreeMap<String, HostTensor>,
) -> Option<Result<HostTensor, String>> {
    let values: Vec<&HostTensor> = inputs.iter().filter_map(|i| constants.get(i)).collect();
    if values.len() != inputs.len() {
        return None;
    }
    let all_int = values.iter().all(|v| !v.dtype().is_float());
    match op {
        Op::Reshape => Some(pick(values[0], out_shape, |i| i)),
        Op::Concat { axis } => Some(concat(&values, *axis, out_shape)),
        Op::Gather {
            axis,
            indices,
            indices_shape,
        } => {
            let x = values[0];
            let xs = strides(x.shape());
            let q = indices_shape.len();
            Some(pick(x, out_shape, |i| {
                let o = unflatten(i, out_shape);
                let flat_index = o[*axis..*axis + q]
                    .iter()
                    .zip(strides(indices_shape))
                    .map(|(a, s)| a * s)
                    .sum::<usize>();
                let mut src = o[..*axis].to_vec();
                src.push(indices[flat_index] as usize);
                src.extend(&o[*axis + q..]);
                src.iter().zip(&xs).map(|(a, s)| a * s).sum()
            }))
        }
        Op::Slice { starts, steps } => {
            let x = values[0];
            let xs = strides(x.shape());
            Some(pick(x, out_shape, |i| {
                unflatten(i, out_shape)
                    .iter()
                    .enumerate()
                    .map(|(d, &o)| (starts[d] + steps[d] * o as i64) as usize * xs[d])
                    .sum()
            }))
        }
        // Arithmetic is folded on integers (shape arithmetic); float
        // arithmetic on weights stays a node (a later pass may fold it).
        Op::Binary(b) if all_int && *b != BinaryOp::Pow => {
            Some(integer_binary(*b, values[0], values[1], out_shape))
        }
        _ => None,
    }
}

fn concat(values: &[&HostTensor], axis: usize, out_shape: &[usize]) -> Result<HostTensor, String> {
    // Which input and where in it, for each position along the axis.
    let mut owner = Vec::with_capacity(out_shape[axis]);
    for (k, v) in values.iter().enumerate() {
        owner.extend((0..v.shape()[axis]).map(|j| (k, j)));
    }
    let wide: Vec<Wide> = values.iter().map(|v| widen(v)).collect();
    let n: usize = out_shape.iter().product();
    let mut ints = Vec::new();
    let mut floats = Vec::new();
    let mut dtype = values.first().map_or(DType::I64, |v| v.dtype());
    for i in 0..n {
        let mut o = unflatten(i, out_shape);
        let (k, j) = owner[o[axis]];
        o[axis] = j;
        let flat: usize = o
            .iter()
            .zip(strides(values[k].shape()))
            .map(|(a, s)| a * s)
            .sum();
        match &wide[k] {
            Wide::Int(v, d) => {
                ints.push(v[flat]);
                dtype = *d;
            }
            Wide::Float(v, d) => {
                floats.push(v[flat]);
                dtype = *d;
            }
        }
    }
    if !ints.is_empty() && !floats.is_empty() {
        return Err("a Concat of integer and float constants".to_string());
    }
    let w = if floats.is_empty() {
        Wide::Int(ints, dtype)
    } else {
        Wide::Float(floats, dtype)
    };
    narrow(out_shape, w)
}

fn integer_binary(
    op: BinaryOp,
    a: &HostTensor,
    b: &HostTensor,
    out_shape: &[usize],
) -> Result<HostTensor, String> {
    let (Wide::Int(av, dtype), Wide::Int(bv, _)) = (widen(a), widen(b)) else {
        return Err("integer arithmetic on floats".to_string());
    };
    let index = |shape: &[usize], o: &[usize]| -> usize {
        let offset = o.len() - shape.len();
        shape
            .iter()
            .zip(strides(shape))
            .enumerate()
            .map(|(d, (&extent, s))| if extent == 1 { 0 } else { o[offset + d] * s })
            .sum()
    };
    let n: usize = out_shape.iter().product();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let o = unflatten(i, out_shape);
        let (x, y) = (av[index(a.shape(), &o)], bv[index(b.shape(), &o)]);
        out.push(match op {
            BinaryOp::Add => x.wrapping_add(y),
            BinaryOp::Sub => x.wrapping_sub(y),
            BinaryOp::Mul => x.wrapping_mul(y),
            BinaryOp::Div if y == 0 => return Err("integer division by zero".to_string()),
            BinaryOp::Div => x.wrapping_div(y),
            BinaryOp::Pow => return Err("integer Pow".to_string()),
        });
    }
    narrow(out_shape, Wide::Int(out, dtype))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(shape: &[usize], v: Vec<i64>) -> HostTensor {
        HostTensor::new(shape, HostData::I64(v)).unwrap()
    }

    #[test]
    fn shape_subgraph_values_fold() {
        let mut c = BTreeMap::new();
        c.insert("s".to_string(), ints(&[4], vec![1, 128, 12, 64]));
        c.insert("t".to_string(), ints(&[1], vec![-1]));
        let gathered = evaluate(
            &Op::Gather {
                axis: 0,
                indices: vec![1],
                indices_shape: vec![],
            },
            &["s".to_string()],
            &[],
            &c,
        )
        .unwrap()
        .unwrap();
        assert_eq!(gathered.data(), &HostData::I64(vec![128]));
        c.insert("g".to_string(), ints(&[1], vec![128]));
        let joined = evaluate(
            &Op::Concat { axis: 0 },
            &["g".to_string(), "t".to_string()],
            &[2],
            &c,
        )
        .unwrap()
        .unwrap();
        assert_eq!(joined.data(), &HostData::I64(vec![128, -1]));
        let product = evaluate(
            &Op::Binary(BinaryOp::Mul),
            &["s".to_string(), "g".to_string()],
            &[4],
            &c,
        )
        .unwrap()
        .unwrap();
        assert_eq!(product.data(), &HostData::I64(vec![128, 16384, 1536, 8192]));
        let sliced = evaluate(
            &Op::Slice {
                starts: vec![3],
                steps: vec![-2],
            },
            &["s".to_string()],
            &[2],
            &c,
        )
        .unwrap()
        .unwrap();
        assert_eq!(sliced.data(), &HostData::I64(vec![64, 128]));
    }

    #[test]
    fn float_arithmetic_is_left_to_kernels() {
        let mut c = BTreeMap::new();
        c.insert(
            "w".to_string(),
            HostTensor::from_f32(&[2], vec![1.0, 2.0]).unwrap(),
        );
        let op = Op::Binary(BinaryOp::Mul);
        assert!(evaluate(&op, &["w".to_string(), "w".to_string()], &[2], &c).is_none());
        let cast = cast(c.get("w").unwrap(), 7).unwrap();
        assert_eq!(cast.data(), &HostData::I64(vec![1, 2]));
    }
}
