//! Element types of tensors and expressions.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The element type of a tensor or an expression.
///
/// `f32` is the primary type; loop variables and index arithmetic are `i64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit IEEE float.
    F32,
    /// 64-bit IEEE float.
    F64,
    /// 32-bit signed integer (wrapping arithmetic).
    I32,
    /// 64-bit signed integer (wrapping arithmetic); the type of loop variables.
    I64,
    /// Boolean: results of comparisons and logical operators.
    Bool,
}

impl DType {
    /// Whether this is a floating-point type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Whether this is an integer type.
    pub fn is_int(self) -> bool {
        matches!(self, DType::I32 | DType::I64)
    }

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// The short name used in text forms (`f32`, `i64`, `bool`, …).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }

    /// Parses a short name (`f32`, `f64`, `i32`, `i64`, `bool`).
    pub fn parse(name: &str) -> Option<DType> {
        [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool]
            .into_iter()
            .find(|d| d.name() == name)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in [DType::F32, DType::F64, DType::I32, DType::I64, DType::Bool] {
            assert_eq!(DType::parse(d.name()), Some(d));
        }
        assert_eq!(DType::parse("f16"), None);
    }
}
