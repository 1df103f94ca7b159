//! Reads of a vectorized chunk as vector loads: contiguous reads, strided
//! reads (a flat index that moves by 2 to [`MAX_DEINTERLEAVED_STEP`]
//! elements per lane, loaded as contiguous vectors and deinterleaved with
//! `shufps`-shaped shuffles) and speculative reads (under a vector select,
//! where discarded lanes may point outside the buffer).
//!
//! A load never touches memory outside the buffer: when the loaded range
//! (the lanes' elements plus what the contiguous vectors cover beyond them)
//! may leave the buffer, which the loop bounds decide statically when they
//! can, one unsigned compare of the lane-0 index picks the vector load or
//! the lane-by-lane path at run time.

use cranelift_codegen::ir::{
    BlockArg, ConstantData, Endianness, InstBuilder, MemFlagsData, Type, Value, condcodes::IntCC,
    types,
};

use crate::arith::{Interval, Overflow};
use crate::te::{Const, DType, Expr, ExprKind, Tensor};
use crate::tir::BufferId;

use super::super::error::CodegenError;
use super::memory::{Storage, group_type};
use super::vector::Lane;
use super::{Binding, FnTranslator, Val};

/// The largest per-lane step of a flat index that is loaded as contiguous
/// vectors and deinterleaved; larger steps gather lane by lane.
pub(crate) const MAX_DEINTERLEAVED_STEP: i64 = 4;

/// How the lanes of a read whose flat index moves by `step` per lane come
/// out of contiguous vector loads: which vectors to load, and the two-source
/// shuffles (in 32-bit sub-lanes, `shufps` form) that gather the lanes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeinterleavePlan {
    /// Elements per vector.
    pub lanes: i64,
    /// The vectors loaded: vector `j` holds elements `j·lanes ..` from the
    /// lane-0 index. They are values `0..loads.len()` of the plan.
    pub loads: Vec<i64>,
    /// Each shuffle `(a, b, select)` makes the next value: sub-lanes 0 and 1
    /// of the result are `a`'s `select[0]`, `select[1]`; sub-lanes 2 and 3
    /// are `b`'s `select[2]`, `select[3]`. The last value is the result.
    pub shuffles: Vec<(usize, usize, [u8; 4])>,
}

impl DeinterleavePlan {
    /// The plan for `lanes` (4 or 2) lanes of 128 bits and a step of
    /// 1..=[`MAX_DEINTERLEAVED_STEP`] elements.
    pub(crate) fn new(lanes: i64, step: i64) -> DeinterleavePlan {
        // Lane k's element is at vector k·step / lanes, position k·step % lanes.
        let at = |k: i64| ((k * step) / lanes, (k * step) % lanes);
        let mut loads: Vec<i64> = (0..lanes).map(|k| at(k).0).collect();
        loads.dedup();
        let value = |j: i64| loads.iter().position(|&l| l == j).unwrap_or(0);
        let mut shuffles = Vec::new();
        if step == 1 {
            return DeinterleavePlan {
                lanes,
                loads,
                shuffles,
            };
        }
        if lanes == 2 {
            // One 64-bit element per half: sub-lanes (2p, 2p + 1).
            let ((j0, p0), (j1, p1)) = (at(0), at(1));
            let (p0, p1) = (2 * p0 as u8, 2 * p1 as u8);
            shuffles.push((value(j0), value(j1), [p0, p0 + 1, p1, p1 + 1]));
            return DeinterleavePlan {
                lanes,
                loads,
                shuffles,
            };
        }
        // Four 32-bit lanes: lanes 0–1 and 2–3 each from one vector (as
        // loaded) or from a shuffle of two; then one shuffle of the halves.
        let half = |first: i64, shuffles: &mut Vec<(usize, usize, [u8; 4])>| {
            let ((ja, pa), (jb, pb)) = (at(first), at(first + 1));
            if ja == jb {
                (value(ja), [pa as u8, pb as u8])
            } else {
                let (pa, pb) = (pa as u8, pb as u8);
                shuffles.push((value(ja), value(jb), [pa, pa, pb, pb]));
                (loads.len() + shuffles.len() - 1, [0, 2])
            }
        };
        let (low, [s0, s1]) = half(0, &mut shuffles);
        let (high, [s2, s3]) = half(2, &mut shuffles);
        shuffles.push((low, high, [s0, s1, s2, s3]));
        DeinterleavePlan {
            lanes,
            loads,
            shuffles,
        }
    }

    /// Elements the loads cover from the lane-0 index.
    pub(crate) fn span(&self) -> i64 {
        (self.loads.last().copied().unwrap_or(0) + 1) * self.lanes
    }
}

/// The byte mask of `shuffle` for a `shufps` with `select`: result
/// sub-lanes 0–1 from the first operand, 2–3 from the second.
pub(crate) fn shufps_bytes(select: [u8; 4]) -> [u8; 16] {
    let mut mask = [0u8; 16];
    for (sub, &s) in select.iter().enumerate() {
        let source = if sub < 2 { 0 } else { 16 };
        for byte in 0..4 {
            mask[4 * sub + byte] = source + 4 * s + byte as u8;
        }
    }
    mask
}

impl FnTranslator<'_, '_, '_> {
    /// The read `e` (`handle[indices]`) in a chunk, as vector loads where
    /// its flat index moves by 1..=[`MAX_DEINTERLEAVED_STEP`] elements per
    /// lane, else lane by lane.
    pub(super) fn vector_read(
        &mut self,
        e: &Expr,
        handle: &Tensor,
        indices: &[Expr],
        lane: &Lane,
        speculative: bool,
    ) -> Result<Value, CodegenError> {
        let buffer = self.buffer_of(handle)?;
        let (flat, step) = self.lane_index(buffer, indices, lane, speculative)?;
        if step == Some(1)
            && let Some(var) = self.promoted_vector(buffer, flat, lane.lanes)
        {
            return Ok(self.b.use_var(var));
        }
        let base = match self.storage.get(&buffer) {
            Some(Storage::Memory(base)) => *base,
            _ => return self.per_lane(e, lane, speculative),
        };
        let Some(step) = step.filter(|s| (1..=MAX_DEINTERLEAVED_STEP).contains(s)) else {
            return self.per_lane(e, lane, speculative);
        };
        let plan = DeinterleavePlan::new(lane.lanes, step);
        let ty = group_type(e.dtype(), lane.lanes);
        // A contiguous read the program makes in every lane is in bounds.
        if step == 1 && !speculative {
            return Ok(self.load_deinterleaved(buffer, base, flat, &plan, ty));
        }
        let last_start = self.func().buffers[buffer].num_elements() - plan.span();
        if last_start < 0 {
            return self.per_lane(e, lane, speculative);
        }
        let range = match flat {
            Val::Int(i) => Interval::point(i),
            _ => self.flat_range(buffer, indices, lane),
        };
        if range.within(0, last_start) {
            return Ok(self.load_deinterleaved(buffer, base, flat, &plan, ty));
        }
        if range.hi < 0 || range.lo > last_start {
            return self.per_lane(e, lane, speculative);
        }
        let index = self.materialize(flat, DType::I64);
        let inside = self
            .b
            .ins()
            .icmp_imm_u(IntCC::UnsignedLessThanOrEqual, index, last_start);
        let (vector, scalar, merge) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let result = self.b.append_block_param(merge, ty);
        self.b.ins().brif(inside, vector, &[], scalar, &[]);
        self.b.switch_to_block(vector);
        let v = self.load_deinterleaved(buffer, base, flat, &plan, ty);
        self.b.ins().jump(merge, &[BlockArg::Value(v)]);
        self.b.switch_to_block(scalar);
        let v = self.per_lane(e, lane, speculative)?;
        self.b.ins().jump(merge, &[BlockArg::Value(v)]);
        self.b.switch_to_block(merge);
        Ok(result)
    }

    /// The plan's loads from element `flat` of `buffer` and its shuffles.
    fn load_deinterleaved(
        &mut self,
        buffer: BufferId,
        base: Value,
        flat: Val,
        plan: &DeinterleavePlan,
        ty: Type,
    ) -> Value {
        let (addr, offset) = self.address(buffer, base, flat);
        let bytes = i64::from(ty.lane_type().bytes()) * plan.lanes;
        let mut values: Vec<Value> = plan
            .loads
            .iter()
            .map(|&j| {
                let at = offset as i64 + j * bytes;
                let at = i32::try_from(at).unwrap_or(i32::MAX);
                self.b.ins().load(ty, MemFlagsData::trusted(), addr, at)
            })
            .collect();
        for &(a, b, select) in &plan.shuffles {
            let v = self.shufps(values[a], values[b], select, ty);
            values.push(v);
        }
        values[values.len() - 1]
    }

    /// `shufps(a, b, select)` on vectors of type `ty`, as a Cranelift byte
    /// shuffle (which the x64 backend lowers to one `shufps`).
    fn shufps(&mut self, a: Value, b: Value, select: [u8; 4], ty: Type) -> Value {
        let flags = MemFlagsData::new().with_endianness(Endianness::Little);
        let a = self.b.ins().bitcast(types::I8X16, flags, a);
        let b = self.b.ins().bitcast(types::I8X16, flags, b);
        let mask = shufps_bytes(select);
        let imm = self
            .b
            .func
            .dfg
            .immediates
            .push(ConstantData::from(&mask[..]));
        let shuffled = self.b.ins().shuffle(a, b, imm);
        self.b.ins().bitcast(ty, flags, shuffled)
    }

    /// The values the lane-0 flat index of `indices` into `buffer` can take
    /// in this chunk, from the ranges of the enclosing loops.
    fn flat_range(&self, buffer: BufferId, indices: &[Expr], lane: &Lane) -> Interval {
        let shape = &self.func().buffers[buffer].shape;
        let mut flat = Interval::point(0);
        for (index, &extent) in indices.iter().zip(shape) {
            let scaled = flat.binary(
                crate::te::BinOp::Mul,
                Interval::point(extent),
                Overflow::Wrap,
            );
            flat = scaled.binary(
                crate::te::BinOp::Add,
                self.index_interval(index, lane),
                Overflow::Wrap,
            );
        }
        flat
    }

    /// The values the `i64` index expression `e` can take, its chunk's
    /// variable at lane 0 (unknown parts make it [`Interval::FULL`]).
    fn index_interval(&self, e: &Expr, lane: &Lane) -> Interval {
        if e.dtype() != DType::I64 {
            return Interval::FULL;
        }
        match e.kind() {
            ExprKind::Const(Const::Int(v)) => Interval::point(*v),
            ExprKind::Var(v) if v.id() == lane.var => match lane.base {
                Val::Int(b) => Interval::point(b),
                _ => self.var_range(v.id()),
            },
            ExprKind::Var(v) => match self.env.get(&v.id()) {
                Some(Binding::Const(c)) => Interval::point(*c),
                _ => self.var_range(v.id()),
            },
            ExprKind::Neg(a) => self.index_interval(a, lane).negate(Overflow::Wrap),
            ExprKind::Binary(op, a, b) => self.index_interval(a, lane).binary(
                *op,
                self.index_interval(b, lane),
                Overflow::Wrap,
            ),
            ExprKind::Select {
                then, otherwise, ..
            } => self
                .index_interval(then, lane)
                .union(self.index_interval(otherwise, lane)),
            _ => Interval::FULL,
        }
    }

    fn var_range(&self, var: crate::te::VarId) -> Interval {
        self.index_ranges
            .get(&var)
            .copied()
            .unwrap_or(Interval::FULL)
    }
}

#[cfg(test)]
#[path = "vector_load_tests.rs"]
mod edge_tests;

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `plan` on a buffer of 32-bit sub-lanes `0, 1, 2, …`, as the
    /// shuffles' semantics say; returns the result's sub-lanes.
    fn simulate(plan: &DeinterleavePlan) -> Vec<u32> {
        let per_vector = 4;
        let mut values: Vec<[u32; 4]> = plan
            .loads
            .iter()
            .map(|&j| std::array::from_fn(|s| (j * per_vector) as u32 + s as u32))
            .collect();
        for &(a, b, select) in &plan.shuffles {
            let mask = shufps_bytes(select);
            let bytes =
                |v: &[u32; 4]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
            let joined: Vec<u8> = bytes(&values[a])
                .into_iter()
                .chain(bytes(&values[b]))
                .collect();
            let out: Vec<u8> = mask.iter().map(|&m| joined[m as usize]).collect();
            values.push(std::array::from_fn(|s| {
                u32::from_le_bytes([out[4 * s], out[4 * s + 1], out[4 * s + 2], out[4 * s + 3]])
            }));
        }
        values[values.len() - 1].to_vec()
    }

    #[test]
    fn every_plan_gathers_the_strided_lanes() {
        for (lanes, sub) in [(4i64, 1i64), (2, 2)] {
            for step in 1..=MAX_DEINTERLEAVED_STEP {
                let plan = DeinterleavePlan::new(lanes, step);
                let want: Vec<u32> = (0..lanes)
                    .flat_map(|k| (0..sub).map(move |s| (k * step * sub + s) as u32))
                    .collect();
                assert_eq!(simulate(&plan), want, "lanes {lanes} step {step}: {plan:?}");
                assert!(plan.span() > (lanes - 1) * step, "{plan:?}");
                assert!(plan.span() <= lanes * step, "{plan:?}");
            }
        }
    }

    #[test]
    fn shuffle_counts_are_small() {
        let count = |lanes, step| DeinterleavePlan::new(lanes, step).shuffles.len();
        assert_eq!(count(4, 1), 0);
        assert_eq!(count(4, 2), 1);
        assert_eq!(count(4, 3), 2);
        assert_eq!(count(4, 4), 3);
        assert_eq!(count(2, 2), 1);
        assert_eq!(count(2, 4), 1);
        assert_eq!(DeinterleavePlan::new(2, 4).loads, vec![0, 2]);
    }

    #[test]
    fn shufps_masks_take_two_sub_lanes_from_each_operand() {
        let mask = shufps_bytes([0, 2, 1, 3]);
        assert_eq!(&mask[..4], &[0, 1, 2, 3]);
        assert_eq!(&mask[4..8], &[8, 9, 10, 11]);
        assert_eq!(&mask[8..12], &[20, 21, 22, 23]);
        assert_eq!(&mask[12..], &[28, 29, 30, 31]);
    }
}
