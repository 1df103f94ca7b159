//! Host tensors: plain owned buffers with a shape and a dtype, the inputs and
//! outputs of the reference interpreter.

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use thiserror::Error;

use super::dtype::DType;

/// The elements of a [`HostTensor`], row-major.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    /// `f32` elements.
    F32(Vec<f32>),
    /// `f64` elements.
    F64(Vec<f64>),
    /// `i32` elements.
    I32(Vec<i32>),
    /// `i64` elements.
    I64(Vec<i64>),
    /// `bool` elements.
    Bool(Vec<bool>),
}

/// A dense row-major tensor in host memory.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    shape: Vec<usize>,
    data: HostData,
}

/// A host tensor built from data that does not fit its shape.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("shape {shape:?} holds {expected} elements, but {got} were given")]
pub struct LengthMismatch {
    /// The requested shape.
    pub shape: Vec<usize>,
    /// Elements the shape holds.
    pub expected: usize,
    /// Elements given.
    pub got: usize,
}

/// A value during interpretation: floats are carried as `f64`, integers as `i64`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Value {
    F(f64),
    I(i64),
    B(bool),
}

impl Value {
    pub fn as_f64(self) -> f64 {
        match self {
            Value::F(v) => v,
            Value::I(v) => v as f64,
            Value::B(v) => f64::from(u8::from(v)),
        }
    }

    pub fn as_i64(self) -> i64 {
        match self {
            Value::F(v) => v as i64,
            Value::I(v) => v,
            Value::B(v) => i64::from(v),
        }
    }

    pub fn as_bool(self) -> bool {
        match self {
            Value::F(v) => v != 0.0,
            Value::I(v) => v != 0,
            Value::B(v) => v,
        }
    }
}

fn element_count(shape: &[usize]) -> usize {
    shape.iter().product()
}

impl HostTensor {
    /// A tensor of zeros (or `false`).
    pub fn zeros(shape: &[usize], dtype: DType) -> HostTensor {
        let n = element_count(shape);
        let data = match dtype {
            DType::F32 => HostData::F32(vec![0.0; n]),
            DType::F64 => HostData::F64(vec![0.0; n]),
            DType::I32 => HostData::I32(vec![0; n]),
            DType::I64 => HostData::I64(vec![0; n]),
            DType::Bool => HostData::Bool(vec![false; n]),
        };
        HostTensor {
            shape: shape.to_vec(),
            data,
        }
    }

    /// A tensor from row-major data; the length must match the shape.
    pub fn new(shape: &[usize], data: HostData) -> Result<HostTensor, LengthMismatch> {
        let got = match &data {
            HostData::F32(v) => v.len(),
            HostData::F64(v) => v.len(),
            HostData::I32(v) => v.len(),
            HostData::I64(v) => v.len(),
            HostData::Bool(v) => v.len(),
        };
        let expected = element_count(shape);
        if got != expected {
            return Err(LengthMismatch {
                shape: shape.to_vec(),
                expected,
                got,
            });
        }
        Ok(HostTensor {
            shape: shape.to_vec(),
            data,
        })
    }

    /// An `f32` tensor from row-major data.
    pub fn from_f32(shape: &[usize], data: Vec<f32>) -> Result<HostTensor, LengthMismatch> {
        HostTensor::new(shape, HostData::F32(data))
    }

    /// A tensor of deterministic pseudo-random values from `seed`: floats
    /// uniform in [-1, 1), integers uniform in [-8, 8), booleans fair.
    pub fn random(shape: &[usize], dtype: DType, seed: u64) -> HostTensor {
        let mut rng = StdRng::seed_from_u64(seed);
        let n = element_count(shape);
        let data = match dtype {
            DType::F32 => HostData::F32((0..n).map(|_| rng.random_range(-1.0..1.0)).collect()),
            DType::F64 => HostData::F64((0..n).map(|_| rng.random_range(-1.0..1.0)).collect()),
            DType::I32 => HostData::I32((0..n).map(|_| rng.random_range(-8..8)).collect()),
            DType::I64 => HostData::I64((0..n).map(|_| rng.random_range(-8..8)).collect()),
            DType::Bool => HostData::Bool((0..n).map(|_| rng.random_bool(0.5)).collect()),
        };
        HostTensor {
            shape: shape.to_vec(),
            data,
        }
    }

    /// The extent of each dimension.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self.data {
            HostData::F32(_) => DType::F32,
            HostData::F64(_) => DType::F64,
            HostData::I32(_) => DType::I32,
            HostData::I64(_) => DType::I64,
            HostData::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        element_count(&self.shape)
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements.
    pub fn data(&self) -> &HostData {
        &self.data
    }

    /// The elements, if the dtype is `f32`.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            HostData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// The elements, mutably, if the dtype is `f32`.
    pub fn as_f32_mut(&mut self) -> Option<&mut [f32]> {
        match &mut self.data {
            HostData::F32(v) => Some(v),
            _ => None,
        }
    }

    /// Every element converted to `f64` (booleans as 0/1), for comparisons.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        (0..self.len()).map(|i| self.get(i).as_f64()).collect()
    }

    pub(crate) fn get(&self, flat: usize) -> Value {
        match &self.data {
            HostData::F32(v) => Value::F(v[flat] as f64),
            HostData::F64(v) => Value::F(v[flat]),
            HostData::I32(v) => Value::I(v[flat] as i64),
            HostData::I64(v) => Value::I(v[flat]),
            HostData::Bool(v) => Value::B(v[flat]),
        }
    }

    /// Stores `value`, rounding or wrapping it to the tensor's dtype.
    pub(crate) fn set(&mut self, flat: usize, value: Value) {
        match &mut self.data {
            HostData::F32(v) => v[flat] = value.as_f64() as f32,
            HostData::F64(v) => v[flat] = value.as_f64(),
            HostData::I32(v) => v[flat] = value.as_i64() as i32,
            HostData::I64(v) => v[flat] = value.as_i64(),
            HostData::Bool(v) => v[flat] = value.as_bool(),
        }
    }
}
