//! The expression tree of tensor expressions.
//!
//! Expressions are immutable and cheap to clone (reference counted). They are
//! built infallibly; type and bounds errors are reported when the tensors are
//! assembled into a [`ComputeDag`](super::ComputeDag).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::dtype::DType;
use super::ids::VarId;
use super::tensor::Tensor;

/// Whether a loop variable ranges over an output axis or a reduction axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IterKind {
    /// An axis of the stage's output.
    Spatial,
    /// An axis summed (or max/min-reduced) over.
    Reduce,
}

/// A loop variable ranging over `0..extent`. Its type is `i64`.
///
/// Two variables are the same only if they were created by the same call.
#[derive(Clone)]
pub struct Var(Arc<VarNode>);

struct VarNode {
    id: VarId,
    name: String,
    extent: i64,
    kind: IterKind,
}

impl Var {
    /// A fresh variable ranging over `0..extent`.
    pub fn new(name: impl Into<String>, extent: i64, kind: IterKind) -> Var {
        Var(Arc::new(VarNode {
            id: VarId::fresh(),
            name: name.into(),
            extent,
            kind,
        }))
    }

    /// A placeholder for a reduction axis that is not a variable; the DAG check
    /// rejects it, naming `not_a_var`.
    pub(crate) fn invalid_axis(not_a_var: &Expr) -> Var {
        Var::new(not_a_var.to_string(), 0, IterKind::Spatial)
    }

    /// The process-unique identity of this variable.
    pub fn id(&self) -> VarId {
        self.0.id
    }

    /// The name given at creation (for display only).
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The variable ranges over `0..extent`.
    pub fn extent(&self) -> i64 {
        self.0.extent
    }

    /// Spatial or reduction axis.
    pub fn kind(&self) -> IterKind {
        self.0.kind
    }

    /// This variable as an expression.
    pub fn expr(&self) -> Expr {
        Expr::new(DType::I64, ExprKind::Var(self.clone()))
    }
}

impl PartialEq for Var {
    fn eq(&self, other: &Var) -> bool {
        self.id() == other.id()
    }
}

impl Eq for Var {}

impl std::hash::Hash for Var {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id().hash(state)
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name())
    }
}

/// A constant value; its type is the dtype of the enclosing expression node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Const {
    /// A float constant (already rounded to the node's float type).
    Float(f64),
    /// An integer constant (already wrapped to the node's integer type).
    Int(i64),
    /// A boolean constant.
    Bool(bool),
}

/// Binary arithmetic and logical operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BinOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`: true division for floats, truncating division for integers.
    Div,
    /// Division rounding towards negative infinity (integers only).
    FloorDiv,
    /// Remainder of [`BinOp::FloorDiv`], with the sign of the divisor (integers only).
    FloorMod,
    /// The smaller operand.
    Min,
    /// The larger operand.
    Max,
    /// Logical and of two booleans.
    And,
    /// Logical or of two booleans.
    Or,
}

impl BinOp {
    /// The symbol or function name used in text forms.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "floordiv",
            BinOp::FloorMod => "floormod",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }

    /// Whether the text form is a function call (`min(a, b)`) rather than infix.
    pub fn is_function(self) -> bool {
        matches!(
            self,
            BinOp::FloorDiv | BinOp::FloorMod | BinOp::Min | BinOp::Max
        )
    }
}

/// Comparison operators; the result is `bool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CmpOp {
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
}

impl CmpOp {
    /// The infix symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    /// The comparison that holds exactly when this one does not.
    pub fn negate(self) -> CmpOp {
        match self {
            CmpOp::Eq => CmpOp::Ne,
            CmpOp::Ne => CmpOp::Eq,
            CmpOp::Lt => CmpOp::Ge,
            CmpOp::Le => CmpOp::Gt,
            CmpOp::Gt => CmpOp::Le,
            CmpOp::Ge => CmpOp::Lt,
        }
    }
}

/// Math intrinsics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intrinsic {
    /// e^x
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// Hyperbolic tangent.
    Tanh,
    /// 1 / (1 + e^-x)
    Sigmoid,
    /// Absolute value (floats and integers).
    Abs,
    /// `pow(x, y)` = x^y (two arguments).
    Pow,
    /// The error function.
    Erf,
}

impl Intrinsic {
    /// The function name used in text forms.
    pub fn name(self) -> &'static str {
        match self {
            Intrinsic::Exp => "exp",
            Intrinsic::Log => "log",
            Intrinsic::Sqrt => "sqrt",
            Intrinsic::Tanh => "tanh",
            Intrinsic::Sigmoid => "sigmoid",
            Intrinsic::Abs => "abs",
            Intrinsic::Pow => "pow",
            Intrinsic::Erf => "erf",
        }
    }

    /// How many arguments the intrinsic takes.
    pub fn arity(self) -> usize {
        match self {
            Intrinsic::Pow => 2,
            _ => 1,
        }
    }

    /// Whether integer arguments are accepted (otherwise floats only).
    pub fn accepts_int(self) -> bool {
        matches!(self, Intrinsic::Abs)
    }
}

/// Reduction operators, with their identity element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReduceOp {
    /// Sum; identity 0.
    Sum,
    /// Maximum; identity −∞ (floats) or the smallest integer.
    Max,
    /// Minimum; identity +∞ (floats) or the largest integer.
    Min,
}

impl ReduceOp {
    /// The function name used in text forms.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }

    /// The identity element for `dtype`, or `None` for `bool` (not reducible).
    pub fn identity(self, dtype: DType) -> Option<Const> {
        let value = match (self, dtype) {
            (_, DType::Bool) => return None,
            (ReduceOp::Sum, d) if d.is_float() => Const::Float(0.0),
            (ReduceOp::Sum, _) => Const::Int(0),
            (ReduceOp::Max, d) if d.is_float() => Const::Float(f64::NEG_INFINITY),
            (ReduceOp::Min, d) if d.is_float() => Const::Float(f64::INFINITY),
            (ReduceOp::Max, DType::I32) => Const::Int(i32::MIN as i64),
            (ReduceOp::Max, _) => Const::Int(i64::MIN),
            (ReduceOp::Min, DType::I32) => Const::Int(i32::MAX as i64),
            (ReduceOp::Min, _) => Const::Int(i64::MAX),
        };
        Some(value)
    }
}

impl ReduceOp {
    /// The identity element as a constant expression of `dtype` (`0` for
    /// `bool`, which no checked DAG reduces).
    pub fn identity_expr(self, dtype: DType) -> Expr {
        match self.identity(dtype) {
            Some(Const::Int(v)) if dtype == DType::I64 => Expr::i64(v),
            Some(Const::Int(v)) => Expr::constant(dtype, v as f64),
            Some(Const::Float(v)) => Expr::constant(dtype, v),
            _ => Expr::constant(dtype, 0.0),
        }
    }
}

/// A reduction over one or more reduction axes. Only allowed as the whole body
/// of a compute stage.
#[derive(Clone, PartialEq)]
pub struct Reduce {
    /// How values are combined.
    pub op: ReduceOp,
    /// The value reduced, evaluated at every point of the reduction domain.
    pub source: Expr,
    /// The reduction axes (variables of kind [`IterKind::Reduce`]).
    pub axes: Vec<Var>,
}

/// The node kinds of an expression.
#[derive(Clone, PartialEq)]
pub enum ExprKind {
    /// A constant of the node's dtype.
    Const(Const),
    /// A loop variable.
    Var(Var),
    /// Arithmetic negation.
    Neg(Expr),
    /// Logical negation of a boolean.
    Not(Expr),
    /// A binary operator.
    Binary(BinOp, Expr, Expr),
    /// A comparison.
    Cmp(CmpOp, Expr, Expr),
    /// `if cond { then } else { otherwise }`; only the chosen branch is evaluated.
    Select {
        /// The boolean condition.
        cond: Expr,
        /// Value when the condition holds.
        then: Expr,
        /// Value otherwise.
        otherwise: Expr,
    },
    /// Conversion to the node's dtype.
    Cast(Expr),
    /// A math intrinsic.
    Call(Intrinsic, Vec<Expr>),
    /// A read of a tensor element.
    Read(Tensor, Vec<Expr>),
    /// A reduction (top level of a compute body only).
    Reduce(Reduce),
}

/// A tensor expression: an immutable, reference-counted tree.
#[derive(Clone)]
pub struct Expr(Arc<ExprNode>);

#[derive(PartialEq)]
struct ExprNode {
    dtype: DType,
    kind: ExprKind,
}

impl Expr {
    pub(crate) fn new(dtype: DType, kind: ExprKind) -> Expr {
        Expr(Arc::new(ExprNode { dtype, kind }))
    }

    /// The dtype of the value this expression produces.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// The node kind.
    pub fn kind(&self) -> &ExprKind {
        &self.0.kind
    }

    /// An `f32` constant.
    pub fn f32(value: f32) -> Expr {
        Expr::new(DType::F32, ExprKind::Const(Const::Float(value as f64)))
    }

    /// An `f64` constant.
    pub fn f64(value: f64) -> Expr {
        Expr::new(DType::F64, ExprKind::Const(Const::Float(value)))
    }

    /// An `i32` constant.
    pub fn i32(value: i32) -> Expr {
        Expr::new(DType::I32, ExprKind::Const(Const::Int(value as i64)))
    }

    /// An `i64` constant.
    pub fn i64(value: i64) -> Expr {
        Expr::new(DType::I64, ExprKind::Const(Const::Int(value)))
    }

    /// A `bool` constant.
    pub fn bool(value: bool) -> Expr {
        Expr::new(DType::Bool, ExprKind::Const(Const::Bool(value)))
    }

    /// A constant of `dtype` holding `value` (rounded or wrapped to fit).
    pub fn constant(dtype: DType, value: f64) -> Expr {
        let c = match dtype {
            DType::F32 => Const::Float(value as f32 as f64),
            DType::F64 => Const::Float(value),
            DType::I32 => Const::Int(value as i32 as i64),
            DType::I64 => Const::Int(value as i64),
            DType::Bool => Const::Bool(value != 0.0),
        };
        Expr::new(dtype, ExprKind::Const(c))
    }

    /// The integer value, if this is an integer constant.
    pub fn as_int(&self) -> Option<i64> {
        match self.kind() {
            ExprKind::Const(Const::Int(v)) => Some(*v),
            _ => None,
        }
    }

    /// The variable, if this expression is a bare loop variable.
    pub fn as_var(&self) -> Option<&Var> {
        match self.kind() {
            ExprKind::Var(v) => Some(v),
            _ => None,
        }
    }

    /// The direct sub-expressions, in evaluation order.
    pub fn children(&self) -> Vec<&Expr> {
        match self.kind() {
            ExprKind::Const(_) | ExprKind::Var(_) => vec![],
            ExprKind::Neg(a) | ExprKind::Not(a) | ExprKind::Cast(a) => vec![a],
            ExprKind::Binary(_, a, b) | ExprKind::Cmp(_, a, b) => vec![a, b],
            ExprKind::Select {
                cond,
                then,
                otherwise,
            } => vec![cond, then, otherwise],
            ExprKind::Call(_, args) | ExprKind::Read(_, args) => args.iter().collect(),
            ExprKind::Reduce(r) => vec![&r.source],
        }
    }

    /// Calls `visit` on this expression and every sub-expression (pre-order).
    pub fn visit(&self, visit: &mut dyn FnMut(&Expr)) {
        visit(self);
        for child in self.children() {
            child.visit(visit);
        }
    }
}

impl PartialEq for Expr {
    fn eq(&self, other: &Expr) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl From<&Expr> for Expr {
    fn from(e: &Expr) -> Expr {
        e.clone()
    }
}

impl From<&Var> for Expr {
    fn from(v: &Var) -> Expr {
        v.expr()
    }
}

/// An operand of an expression builder: an expression, or a Rust literal whose
/// dtype adapts to the other operand (`x + 1.0` is `f64` when `x` is `f64`).
///
/// A literal with nothing to adapt to becomes `f32` (floats), `i64`
/// (integers; the type of index arithmetic) or `bool`.
#[derive(Clone)]
pub enum Operand {
    /// An expression with a fixed dtype.
    Expr(Expr),
    /// A float literal.
    Float(f64),
    /// An integer literal.
    Int(i64),
    /// A boolean literal.
    Bool(bool),
}

impl Operand {
    /// The dtype this operand has on its own, if it is an expression.
    fn fixed_dtype(&self) -> Option<DType> {
        match self {
            Operand::Expr(e) => Some(e.dtype()),
            _ => None,
        }
    }

    /// Materialises the operand, giving literals the dtype `hint` where it fits.
    pub fn into_expr_hint(self, hint: Option<DType>) -> Expr {
        match (self, hint) {
            (Operand::Expr(e), _) => e,
            (Operand::Float(v), Some(d)) if d.is_float() => Expr::constant(d, v),
            (Operand::Float(v), _) => Expr::constant(DType::F32, v),
            (Operand::Int(v), Some(DType::I32)) => Expr::i32(v as i32),
            (Operand::Int(v), Some(d)) if d.is_float() => Expr::constant(d, v as f64),
            (Operand::Int(v), _) => Expr::i64(v),
            (Operand::Bool(b), _) => Expr::bool(b),
        }
    }

    /// Materialises the operand with default literal dtypes.
    pub fn into_expr(self) -> Expr {
        self.into_expr_hint(None)
    }
}

/// Materialises two operands, letting literals adopt the other side's dtype.
pub(crate) fn unify(a: Operand, b: Operand) -> (Expr, Expr) {
    let (ha, hb) = (b.fixed_dtype(), a.fixed_dtype());
    (a.into_expr_hint(ha), b.into_expr_hint(hb))
}

impl From<Expr> for Operand {
    fn from(e: Expr) -> Operand {
        Operand::Expr(e)
    }
}

impl From<&Expr> for Operand {
    fn from(e: &Expr) -> Operand {
        Operand::Expr(e.clone())
    }
}

impl From<&Var> for Operand {
    fn from(v: &Var) -> Operand {
        Operand::Expr(v.expr())
    }
}

impl From<f32> for Operand {
    fn from(v: f32) -> Operand {
        Operand::Float(v as f64)
    }
}

impl From<f64> for Operand {
    fn from(v: f64) -> Operand {
        Operand::Float(v)
    }
}

impl From<i32> for Operand {
    fn from(v: i32) -> Operand {
        Operand::Int(v as i64)
    }
}

impl From<i64> for Operand {
    fn from(v: i64) -> Operand {
        Operand::Int(v)
    }
}

impl From<usize> for Operand {
    fn from(v: usize) -> Operand {
        Operand::Int(v as i64)
    }
}

impl From<bool> for Operand {
    fn from(v: bool) -> Operand {
        Operand::Bool(v)
    }
}
