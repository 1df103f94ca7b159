//! The e-graph language of index and condition expressions.
//!
//! Integer nodes are `i64` with wrapping arithmetic, exactly like
//! [`Expr`](crate::te::Expr) index arithmetic; `/` truncates, `floordiv` and
//! `floormod` round towards negative infinity. Loop variables and opaque
//! sub-expressions (reads, casts, float comparisons, …) are leaves that refer
//! to per-call side tables by position, so no global symbol is ever interned.

use std::fmt;
use std::str::FromStr;

use egg::{Id, define_language};

/// A loop variable: position in the conversion's variable table (`v3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct VarSlot(pub u32);

/// An opaque sub-expression: position in the conversion's leaf table (`o3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct LeafSlot(pub u32);

fn parse_slot(s: &str, prefix: char) -> Result<u32, String> {
    s.strip_prefix(prefix)
        .and_then(|n| n.parse::<u32>().ok())
        .ok_or_else(|| format!("not a {prefix}-slot: {s}"))
}

impl FromStr for VarSlot {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_slot(s, 'v').map(VarSlot)
    }
}

impl fmt::Display for VarSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

impl FromStr for LeafSlot {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_slot(s, 'o').map(LeafSlot)
    }
}

impl fmt::Display for LeafSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "o{}", self.0)
    }
}

define_language! {
    /// Integer (`i64`) and boolean expressions over loop variables.
    pub(super) enum IndexLang {
        "+" = Add([Id; 2]),
        "-" = Sub([Id; 2]),
        "*" = Mul([Id; 2]),
        "/" = Div([Id; 2]),
        "floordiv" = FloorDiv([Id; 2]),
        "floormod" = FloorMod([Id; 2]),
        "min" = Min([Id; 2]),
        "max" = Max([Id; 2]),
        "neg" = Neg(Id),
        "<" = Lt([Id; 2]),
        "<=" = Le([Id; 2]),
        ">" = Gt([Id; 2]),
        ">=" = Ge([Id; 2]),
        "==" = Eq([Id; 2]),
        "!=" = Ne([Id; 2]),
        "&&" = And([Id; 2]),
        "||" = Or([Id; 2]),
        "!" = Not(Id),
        "select" = Select([Id; 3]),
        Bool(bool),
        Num(i64),
        Var(VarSlot),
        Leaf(LeafSlot),
    }
}

impl IndexLang {
    /// Whether this node divides (truncating or floor division, or modulo).
    pub(super) fn is_division(&self) -> bool {
        matches!(
            self,
            IndexLang::Div(_) | IndexLang::FloorDiv(_) | IndexLang::FloorMod(_)
        )
    }

    /// Whether this node is a constant.
    pub(super) fn is_constant(&self) -> bool {
        matches!(self, IndexLang::Num(_) | IndexLang::Bool(_))
    }
}
