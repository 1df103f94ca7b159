//! Vectorized loops that only copy a run of elements,
//! `dst[…, a + i] = src[…, b + i]` for `i < extent` (the interior rows of a
//! padded copy, a row of a cached copy): one call of `tessera_copy`
//! (`memmove`, see [`crate::runtime::copy`]), which runs at the machine's
//! full width where Cranelift's loop moves 128 bits at a time. A copy is a
//! copy: the result is bit-identical to the loop.

use cranelift_codegen::ir::{InstBuilder, Value, types};

use crate::arith::Affine;
use crate::te::{Expr, ExprKind, Tensor, Var, VarId};
use crate::tir::{BufferId, Stmt};

use super::super::error::CodegenError;
use super::memory::Storage;
use super::vector::{MAX_UNROLLED_CHUNKS, uses};
use super::{Binding, FnTranslator};

/// Shorter copies stay vector code: unrolled, it is as fast as a call.
pub(crate) const MIN_COPY_ELEMENTS: i64 = MAX_UNROLLED_CHUNKS * 4 + 1;

/// Whether `indices` move by exactly one element per step of `var`: only the
/// innermost (contiguous) index uses it, with coefficient 1.
fn contiguous_in(indices: &[Expr], var: VarId) -> bool {
    let Some((innermost, outer)) = indices.split_last() else {
        return false;
    };
    outer.iter().all(|e| !uses(e, var)) && Affine::of(innermost).coefficient(var) == Some(1)
}

/// The buffers of `for var in 0..extent { body }` when it is a contiguous
/// copy long enough to call for: `(dst, its indices, src, its indices)`;
/// `buffer_of` resolves the tensor a read names (the caller's map, made
/// once per function).
pub(crate) fn contiguous_copy<'b>(
    var: VarId,
    extent: i64,
    body: &'b Stmt,
    func: &crate::tir::PrimFunc,
    buffer_of: impl Fn(&Tensor) -> Option<BufferId>,
) -> Option<(BufferId, &'b [Expr], BufferId, &'b [Expr])> {
    if extent < MIN_COPY_ELEMENTS {
        return None;
    }
    let Stmt::Store {
        buffer: dst,
        indices: dst_indices,
        value,
    } = body
    else {
        return None;
    };
    let ExprKind::Read(handle, src_indices) = value.kind() else {
        return None;
    };
    let src = buffer_of(handle)?;
    let dtype = func.buffers[*dst].dtype;
    let same_type = func.buffers[src].dtype == dtype && value.dtype() == dtype;
    (src != *dst && same_type && contiguous_in(dst_indices, var) && contiguous_in(src_indices, var))
        .then_some((*dst, dst_indices.as_slice(), src, src_indices.as_slice()))
}

impl FnTranslator<'_, '_, '_> {
    /// Runs `for var in 0..extent vectorized { body }` as one copy call
    /// when it is a contiguous copy between two buffers in memory; `false`
    /// (nothing emitted) otherwise.
    pub fn copy_loop(&mut self, var: &Var, extent: i64, body: &Stmt) -> Result<bool, CodegenError> {
        let Some((dst, dst_indices, src, src_indices)) =
            contiguous_copy(var.id(), extent, body, self.func(), |h| {
                self.buffer_of(h).ok()
            })
        else {
            return Ok(false);
        };
        let (Some(dst_base), Some(src_base)) = (self.memory_base(dst), self.memory_base(src))
        else {
            return Ok(false);
        };
        self.env.insert(var.id(), Binding::Const(0));
        let first = self
            .flat_index(dst, dst_indices, false)
            .and_then(|d| Ok((d, self.flat_index(src, src_indices, false)?)));
        self.env.remove(&var.id());
        let (dst_flat, src_flat) = first?;
        let dst_addr = self.flat_address(dst, dst_base, dst_flat);
        let src_addr = self.flat_address(src, src_base, src_flat);
        let size = self.func().buffers[dst].dtype.size_bytes() as i64;
        let bytes = self.b.ins().iconst(types::I64, extent * size);
        let f = self
            .imports
            .get(&mut self.b, "tessera_copy", &[types::I64; 3], None)?;
        self.b.ins().call(f, &[dst_addr, src_addr, bytes]);
        Ok(true)
    }

    /// The address of `buffer`'s element 0 when it lives in memory.
    fn memory_base(&self, buffer: BufferId) -> Option<Value> {
        match self.storage.get(&buffer) {
            Some(Storage::Memory(base)) => Some(*base),
            _ => None,
        }
    }

    /// The address of element `flat` of `buffer`, which starts at `base`.
    pub(super) fn flat_address(
        &mut self,
        buffer: BufferId,
        base: Value,
        flat: super::Val,
    ) -> Value {
        let (addr, offset) = self.address(buffer, base, flat);
        if offset == 0 {
            addr
        } else {
            self.b.ins().iadd_imm_s(addr, i64::from(offset))
        }
    }
}
