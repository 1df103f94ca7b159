//! Buffers: where each lives (argument, stack slot, heap block, or SSA
//! variables when every access has a constant index — register promotion),
//! and loads and stores.

use std::collections::{HashMap, HashSet};

use cranelift_codegen::ir::{
    InstBuilder, MemFlagsData, StackSlotData, StackSlotKind, Value, types,
};
use cranelift_frontend::Variable;

use crate::te::{DType, Expr, ExprKind, Tensor};
use crate::tir::{BufferId, ForKind, PrimFunc, Stmt};

use super::super::error::CodegenError;
use super::{FnTranslator, Val, clif_type};

/// Buffers up to this size live on the stack; larger ones on the heap.
const STACK_LIMIT_BYTES: i64 = 32 * 1024;

use super::super::PROMOTE_LIMIT;

/// Where a buffer's elements live.
pub(crate) enum Storage {
    /// In memory at this address.
    Memory(Value),
    /// SSA variables (every index is a compile-time constant): one per group
    /// of `lanes` consecutive elements (a vector when `lanes > 1`).
    Promoted {
        /// Elements per variable.
        lanes: i64,
        /// The variable of each group (`flat / lanes`).
        vars: HashMap<i64, Variable>,
    },
}

/// Lanes of a 128-bit vector of `dtype` (1 where no vector type is used).
pub(crate) fn vector_lanes(dtype: DType) -> i64 {
    match dtype {
        DType::F32 | DType::I32 => 4,
        DType::F64 | DType::I64 => 2,
        DType::Bool => 1,
    }
}

/// The Cranelift type of `lanes` elements of `dtype`.
pub(crate) fn group_type(dtype: DType, lanes: i64) -> cranelift_codegen::ir::Type {
    let scalar = clif_type(dtype);
    if lanes > 1 {
        scalar.by(lanes as u32).unwrap_or(scalar)
    } else {
        scalar
    }
}

fn flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// Where code generation keeps an allocated buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoragePlan {
    /// In SSA variables (register promotion): one per `lanes` consecutive
    /// elements, a vector when `lanes > 1`.
    Registers {
        /// Elements per variable.
        lanes: i64,
    },
    /// In a stack slot of this many bytes.
    Stack {
        /// Size of the slot.
        bytes: i64,
    },
    /// In a heap block of this many bytes, freed on return.
    Heap {
        /// Size of the block.
        bytes: i64,
    },
}

/// Where buffer `id`, allocated around `scope`, is kept by a function that
/// is (`in_parallel`) or is not an outlined parallel body.
pub(crate) fn storage_plan(
    func: &PrimFunc,
    id: BufferId,
    scope: &Stmt,
    in_parallel: bool,
) -> StoragePlan {
    let buffer = &func.buffers[id];
    let elements = buffer.num_elements();
    let bytes = elements * buffer.dtype.size_bytes() as i64;
    if elements <= PROMOTE_LIMIT && promotable(scope, id, &buffer.handle, in_parallel) {
        let lanes = vector_lanes(buffer.dtype);
        let lanes = if elements % lanes == 0 { lanes } else { 1 };
        StoragePlan::Registers { lanes }
    } else if bytes <= STACK_LIMIT_BYTES {
        StoragePlan::Stack { bytes }
    } else {
        StoragePlan::Heap { bytes }
    }
}

/// Every `Allocate` in `s`, outside loops that will be outlined.
pub(crate) fn allocations(s: &Stmt, in_parallel: bool, out: &mut Vec<(BufferId, Stmt)>) {
    match s {
        Stmt::Allocate { buffer, body } => {
            // A buffer allocated in several places (the pieces of a
            // partitioned loop) gets one plan, which must suit every place.
            match out.iter_mut().find(|(b, _)| b == buffer) {
                Some((_, scope)) => {
                    *scope = Stmt::Seq(vec![
                        std::mem::replace(scope, Stmt::nop()),
                        (**body).clone(),
                    ])
                }
                None => out.push((*buffer, (**body).clone())),
            }
            allocations(body, in_parallel, out);
        }
        Stmt::For {
            kind: ForKind::Parallel,
            ..
        } if !in_parallel => {}
        Stmt::For { body, .. } | Stmt::Let { body, .. } => allocations(body, in_parallel, out),
        Stmt::Seq(items) => items.iter().for_each(|i| allocations(i, in_parallel, out)),
        Stmt::IfThenElse {
            then, otherwise, ..
        } => {
            allocations(then, in_parallel, out);
            if let Some(o) = otherwise {
                allocations(o, in_parallel, out);
            }
        }
        Stmt::Store { .. }
        | Stmt::MicroKernelCall(_)
        | Stmt::RowMathCall(_)
        | Stmt::PackCall(_)
        | Stmt::StencilCall(_) => {}
    }
}

/// Whether every access to `handle`/`buffer` in `body` has indices that are
/// compile-time constants once loops are expanded: built from constants,
/// variables of unrolled loops, and variables of vectorized loops short
/// enough to be fully unrolled into vectors; and no parallel loop would take
/// an access to another function.
fn promotable(body: &Stmt, buffer: BufferId, handle: &Tensor, in_parallel: bool) -> bool {
    let mut unrolled = HashSet::new();
    let mut outlined = false;
    body.visit(&mut |s| {
        if let Stmt::For {
            var, kind, extent, ..
        } = s
        {
            match kind {
                ForKind::Unrolled => {
                    unrolled.insert(var.id());
                }
                ForKind::Vectorized if *extent <= super::vector::MAX_UNROLLED_CHUNKS * 4 => {
                    unrolled.insert(var.id());
                }
                ForKind::Parallel if !in_parallel => outlined = true,
                _ => {}
            }
        }
    });
    if outlined {
        return false;
    }
    let constant = |e: &Expr| {
        !e.any(&mut |x| match x.kind() {
            ExprKind::Var(v) => !unrolled.contains(&v.id()),
            ExprKind::Read(..) => true,
            _ => false,
        })
    };
    let mut ok = true;
    let mut check_reads = |e: &Expr| {
        e.visit(&mut |x| {
            if let ExprKind::Read(t, idx) = x.kind()
                && t == handle
            {
                ok &= idx.iter().all(constant);
            }
        });
    };
    let mut stores_ok = true;
    body.visit(&mut |s| match s {
        Stmt::Store {
            buffer: b, indices, ..
        } if *b == buffer => stores_ok &= indices.iter().all(constant),
        // A micro-kernel takes the buffer's address.
        Stmt::MicroKernelCall(call) if call.operands().iter().any(|o| o.buffer == buffer) => {
            stores_ok = false
        }
        // So does a row primitive.
        Stmt::RowMathCall(call) if call.buffer == buffer => stores_ok = false,
        // And a packing routine.
        Stmt::PackCall(call) if call.src.buffer == buffer || call.dst.buffer == buffer => {
            stores_ok = false
        }
        // And a stencil primitive.
        Stmt::StencilCall(call) if call.uses(buffer) => stores_ok = false,
        _ => {}
    });
    body.visit_exprs(&mut check_reads);
    ok && stores_ok
}

impl FnTranslator<'_, '_, '_> {
    /// Decides and reserves storage for every allocation of `body` (called at
    /// the function's entry).
    pub fn plan_allocations(&mut self, body: &Stmt) -> Result<(), CodegenError> {
        let mut found = Vec::new();
        allocations(body, self.in_parallel, &mut found);
        for (id, scope) in found {
            let storage = match storage_plan(self.func(), id, &scope, self.in_parallel) {
                StoragePlan::Registers { lanes } => Storage::Promoted {
                    lanes,
                    vars: HashMap::new(),
                },
                StoragePlan::Stack { bytes } => {
                    let slot = self.b.create_sized_stack_slot(StackSlotData::new(
                        StackSlotKind::ExplicitSlot,
                        bytes.max(1) as u32,
                        6,
                    ));
                    Storage::Memory(self.b.ins().stack_addr(types::I64, slot, 0))
                }
                StoragePlan::Heap { bytes } => {
                    let alloc = self.imports.get(
                        &mut self.b,
                        "tessera_alloc",
                        &[types::I64],
                        Some(types::I64),
                    )?;
                    let size = self.b.ins().iconst(types::I64, bytes);
                    let call = self.b.ins().call(alloc, &[size]);
                    let block = self.b.inst_results(call)[0];
                    self.heap.push(block);
                    Storage::Memory(block)
                }
            };
            self.storage.insert(id, storage);
        }
        Ok(())
    }

    /// At an `Allocate`: promoted elements start defined (as zero) so that
    /// every use has a definition.
    pub fn enter_allocation(&mut self, buffer: BufferId) {
        let dtype = self.func().buffers[buffer].dtype;
        let elements = self.func().buffers[buffer].num_elements();
        let Some(Storage::Promoted { lanes, .. }) = self.storage.get(&buffer) else {
            return;
        };
        let lanes = *lanes;
        let ty = group_type(dtype, lanes);
        let mut zero = self.materialize(Val::Int(0), dtype);
        if lanes > 1 {
            zero = self.b.ins().splat(ty, zero);
        }
        let mut vars = HashMap::new();
        for group in 0..elements / lanes {
            let var = self.b.declare_var(ty);
            self.b.def_var(var, zero);
            vars.insert(group, var);
        }
        self.storage
            .insert(buffer, Storage::Promoted { lanes, vars });
    }

    /// The variable and lane holding element `flat` of a promoted buffer.
    fn promoted_slot(&self, buffer: BufferId, flat: Val) -> Option<(Variable, i64, i64)> {
        let (Some(Storage::Promoted { lanes, vars }), Val::Int(i)) =
            (self.storage.get(&buffer), flat)
        else {
            return None;
        };
        vars.get(&i.div_euclid(*lanes))
            .map(|v| (*v, i.rem_euclid(*lanes), *lanes))
    }

    /// The whole vector variable of a promoted buffer starting at `flat`,
    /// if the buffer is promoted by vectors of `lanes` and `flat` is aligned.
    pub fn promoted_vector(&self, buffer: BufferId, flat: Val, lanes: i64) -> Option<Variable> {
        match self.promoted_slot(buffer, flat) {
            Some((var, 0, l)) if l == lanes => Some(var),
            _ => None,
        }
    }

    /// Whether `buffer` is promoted to variables.
    pub fn is_promoted(&self, buffer: BufferId) -> bool {
        matches!(self.storage.get(&buffer), Some(Storage::Promoted { .. }))
    }

    /// The row-major element offset of `indices` in `buffer`.
    pub fn flat_index(
        &mut self,
        buffer: BufferId,
        indices: &[Expr],
        speculative: bool,
    ) -> Result<Val, CodegenError> {
        let shape = self.func().buffers[buffer].shape.clone();
        let mut flat = Val::Int(0);
        for (index, extent) in indices.iter().zip(&shape) {
            let v = self.expr(index, speculative)?;
            flat = self.index_scale(flat, *extent);
            flat = self.index_add(flat, v);
        }
        Ok(flat)
    }

    pub fn address(&mut self, buffer: BufferId, base: Value, flat: Val) -> (Value, i32) {
        let size = self.func().buffers[buffer].dtype.size_bytes() as i64;
        match flat {
            Val::Int(i) if (i * size) <= i32::MAX as i64 && i >= 0 => (base, (i * size) as i32),
            other => {
                let offset = self.index_scale(other, size);
                let offset = self.materialize(offset, DType::I64);
                (self.b.ins().iadd(base, offset), 0)
            }
        }
    }

    pub fn buffer_of(&self, handle: &Tensor) -> Result<BufferId, CodegenError> {
        self.imports
            .shared
            .handles
            .get(&handle.id())
            .copied()
            .ok_or_else(|| {
                CodegenError::Unsupported(format!("read of unknown buffer '{}'", handle.name()))
            })
    }

    /// A load of `handle[indices]`; clamped into the buffer when speculative.
    pub fn load(
        &mut self,
        handle: &Tensor,
        indices: &[Expr],
        speculative: bool,
    ) -> Result<Val, CodegenError> {
        let buffer = self.buffer_of(handle)?;
        let mut flat = self.flat_index(buffer, indices, speculative)?;
        let len = self.func().buffers[buffer].num_elements();
        if speculative {
            flat = self.clamp_index(flat, len);
        }
        let dtype = self.func().buffers[buffer].dtype;
        match self.storage.get(&buffer) {
            Some(Storage::Promoted { .. }) => match self.promoted_slot(buffer, flat) {
                Some((var, _, 1)) => Ok(Val::Dyn(self.b.use_var(var))),
                Some((var, lane, _)) => {
                    let group = self.b.use_var(var);
                    Ok(Val::Dyn(self.b.ins().extractlane(group, lane as u8)))
                }
                None => Err(CodegenError::Unsupported(format!(
                    "promoted buffer '{}' read at a non-constant index",
                    handle.name()
                ))),
            },
            Some(Storage::Memory(base)) => {
                let (addr, offset) = self.address(buffer, *base, flat);
                Ok(Val::Dyn(self.b.ins().load(
                    clif_type(dtype),
                    flags(),
                    addr,
                    offset,
                )))
            }
            None => Err(CodegenError::Unsupported(format!(
                "buffer '{}' used outside its allocation",
                handle.name()
            ))),
        }
    }

    /// `buffer[indices] = value`.
    pub fn store(
        &mut self,
        buffer: BufferId,
        indices: &[Expr],
        value: &Expr,
    ) -> Result<(), CodegenError> {
        let dtype = self.func().buffers[buffer].dtype;
        let v = self.expr(value, false)?;
        let v = self.materialize(v, dtype);
        let flat = self.flat_index(buffer, indices, false)?;
        self.store_value(buffer, flat, v)
    }

    /// Stores the scalar `v` at element `flat` of `buffer`.
    pub fn store_value(
        &mut self,
        buffer: BufferId,
        flat: Val,
        v: Value,
    ) -> Result<(), CodegenError> {
        match self.storage.get(&buffer) {
            Some(Storage::Promoted { .. }) => match self.promoted_slot(buffer, flat) {
                Some((var, _, 1)) => {
                    self.b.def_var(var, v);
                    Ok(())
                }
                Some((var, lane, _)) => {
                    let group = self.b.use_var(var);
                    let updated = self.b.ins().insertlane(group, v, lane as u8);
                    self.b.def_var(var, updated);
                    Ok(())
                }
                None => Err(CodegenError::Unsupported(
                    "promoted buffer written at a non-constant index".into(),
                )),
            },
            Some(Storage::Memory(base)) => {
                let (addr, offset) = self.address(buffer, *base, flat);
                self.b.ins().store(flags(), v, addr, offset);
                Ok(())
            }
            None => Err(CodegenError::Unsupported(
                "store to a buffer outside its allocation".into(),
            )),
        }
    }
}
