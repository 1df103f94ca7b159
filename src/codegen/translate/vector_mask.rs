//! Lane masks of integer conditions in a vectorized chunk: a select whose
//! condition compares `i64` expressions affine in the chunk's variable (the
//! bounds test of an inlined padding, `w + rs >= 1 && w + rs < W + 1`)
//! becomes one vector compare per comparison instead of a select computed
//! lane by lane, so its branches can be loaded as vectors.

use cranelift_codegen::ir::{
    ConstantData, Endianness, InstBuilder, MemFlagsData, Type, Value, types,
};

use crate::arith::{Affine, Decompose};
use crate::te::{BinOp, CmpOp, DType, Expr, ExprKind};

use super::super::error::CodegenError;
use super::expr::int_cc;
use super::memory::{group_type, vector_lanes};
use super::vector::{Lane, uses};
use super::{FnTranslator, Val};

/// The largest per-lane step of a compared difference (so that lane
/// offsets stay far inside `i32` next to the clamped lane-0 difference).
const MAX_MASK_STEP: u64 = 1 << 20;

/// Lane-0 differences are clamped into `±CLAMP` before narrowing to `i32`:
/// with steps of at most [`MAX_MASK_STEP`] over 3 lanes, no sign changes.
const CLAMP: i64 = 1 << 24;

impl FnTranslator<'_, '_, '_> {
    /// A lane mask (all ones where `cond` holds) as a vector of `dtype`, for
    /// a condition built from `&&`, `||`, `!`, conditions the same in every
    /// lane, and comparisons of `i64` expressions affine in the chunk's
    /// variable; none for any other condition.
    pub(super) fn lane_mask(
        &mut self,
        cond: &Expr,
        lane: &Lane,
        speculative: bool,
        dtype: DType,
    ) -> Result<Option<Value>, CodegenError> {
        let mask_type = match (lane.lanes, vector_lanes(dtype)) {
            (4, 4) => types::I32X4,
            (2, 2) => types::I64X2,
            _ => return Ok(None),
        };
        let Some(mask) = self.int_mask(cond, lane, speculative, mask_type)? else {
            return Ok(None);
        };
        let ty = group_type(dtype, lane.lanes);
        if ty == mask_type {
            return Ok(Some(mask));
        }
        let flags = MemFlagsData::new().with_endianness(Endianness::Little);
        Ok(Some(self.b.ins().bitcast(ty, flags, mask)))
    }

    fn int_mask(
        &mut self,
        cond: &Expr,
        lane: &Lane,
        speculative: bool,
        ty: Type,
    ) -> Result<Option<Value>, CodegenError> {
        if !uses(cond, lane.var) {
            let lane_type = ty.lane_type();
            let all = match self.expr(cond, speculative)? {
                Val::Bool(b) => self.lane_constant(lane_type, -i64::from(b)),
                other => {
                    let bit = self.materialize(other, DType::Bool);
                    let wide = self.b.ins().uextend(lane_type, bit);
                    self.b.ins().ineg(wide)
                }
            };
            return Ok(Some(self.b.ins().splat(ty, all)));
        }
        Ok(match cond.kind() {
            ExprKind::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                // As in scalar code, the right side may be evaluated where
                // the left decides: its loads are speculative.
                let (Some(x), Some(y)) = (
                    self.int_mask(a, lane, speculative, ty)?,
                    self.int_mask(b, lane, true, ty)?,
                ) else {
                    return Ok(None);
                };
                Some(if *op == BinOp::And {
                    self.b.ins().band(x, y)
                } else {
                    self.b.ins().bor(x, y)
                })
            }
            ExprKind::Not(a) => self
                .int_mask(a, lane, speculative, ty)?
                .map(|x| self.b.ins().bnot(x)),
            ExprKind::Cmp(op, a, b) if a.dtype() == DType::I64 => {
                self.affine_compare(*op, a, b, lane, speculative, ty)?
            }
            _ => None,
        })
    }

    /// `a op b` per lane, as `(a - b)(lane 0) + k·lane op 0` where `k` is
    /// the difference's step per lane.
    fn affine_compare(
        &mut self,
        op: CmpOp,
        a: &Expr,
        b: &Expr,
        lane: &Lane,
        speculative: bool,
        ty: Type,
    ) -> Result<Option<Value>, CodegenError> {
        let exact = Decompose::EXACT;
        let (Some(ka), Some(kb)) = (
            Affine::with(a, exact).coefficient(lane.var),
            Affine::with(b, exact).coefficient(lane.var),
        ) else {
            return Ok(None);
        };
        let step = ka.wrapping_sub(kb);
        if step.unsigned_abs() > MAX_MASK_STEP {
            return Ok(None);
        }
        self.bind_lane(lane, 0);
        let x = self.expr(a, speculative);
        let y = self.expr(b, speculative);
        self.env.remove(&lane.var);
        let difference = match (x?, y?) {
            (Val::Int(x), Val::Int(y)) => Val::Int(x.wrapping_sub(y)),
            (x, y) => {
                let (x, y) = (
                    self.materialize(x, DType::I64),
                    self.materialize(y, DType::I64),
                );
                Val::Dyn(self.b.ins().isub(x, y))
            }
        };
        let lane_type = ty.lane_type();
        let first = if lane_type == types::I32 {
            match difference {
                Val::Int(d) => self.lane_constant(types::I32, d.clamp(-CLAMP, CLAMP)),
                other => {
                    let d = self.materialize(other, DType::I64);
                    let high = self.b.ins().iconst(types::I64, CLAMP);
                    let low = self.b.ins().iconst(types::I64, -CLAMP);
                    let d = self.b.ins().smin(d, high);
                    let d = self.b.ins().smax(d, low);
                    self.b.ins().ireduce(types::I32, d)
                }
            }
        } else {
            self.materialize(difference, DType::I64)
        };
        let first = self.b.ins().splat(ty, first);
        let offsets = self.lane_offsets(ty, step);
        let per_lane = self.b.ins().iadd(first, offsets);
        let zero = self.lane_offsets(ty, 0);
        Ok(Some(self.b.ins().icmp(int_cc(op), per_lane, zero)))
    }

    /// The integer constant `v` of `lane_type` (`i32` or `i64`).
    fn lane_constant(&mut self, lane_type: Type, v: i64) -> Value {
        let bits = if lane_type == types::I32 {
            i64::from(v as i32 as u32)
        } else {
            v
        };
        self.b.ins().iconst(lane_type, bits)
    }

    /// The constant vector `[0, step, 2·step, …]` of integer type `ty`.
    fn lane_offsets(&mut self, ty: Type, step: i64) -> Value {
        let lanes = i64::from(ty.lane_count());
        let bytes: Vec<u8> = (0..lanes)
            .flat_map(|i| {
                let v = step * i;
                if ty.lane_type() == types::I32 {
                    (v as i32).to_le_bytes().to_vec()
                } else {
                    v.to_le_bytes().to_vec()
                }
            })
            .collect();
        let constant = self.b.func.dfg.constants.insert(ConstantData::from(bytes));
        self.b.ins().vconst(ty, constant)
    }
}
