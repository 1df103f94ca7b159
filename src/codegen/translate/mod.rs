//! Translation of one loop-IR function (or an outlined parallel loop body)
//! into Cranelift IR.

pub(crate) mod copy_call;
mod entry;
mod expr;
pub(crate) mod memory;
mod micro_kernel_call;
mod min_max;
mod pack_call;
mod parallel;
mod row_math_call;
mod stencil_call;
mod value;
pub(crate) mod vector;
mod vector_load;
mod vector_mask;
mod vector_reduce;

use std::collections::HashMap;

use cranelift_codegen::ir::{AbiParam, FuncRef, InstBuilder, Type, Value, condcodes::IntCC, types};
use cranelift_frontend::{FunctionBuilder, Variable};
use cranelift_module::{FuncId, Linkage, Module};

use crate::arith::Interval;
use crate::te::{DType, TensorId, VarId};
use crate::tir::{BufferId, ForKind, PrimFunc, Stmt};

use super::error::CodegenError;
use super::math::Imports;
use super::options::CodegenOptions;
pub(crate) use entry::define_kernel;
use memory::Storage;
pub(crate) use value::Val;

/// The Cranelift type holding a value of `dtype` (booleans are `i8` 0/1).
pub(crate) fn clif_type(dtype: DType) -> Type {
    match dtype {
        DType::F32 => types::F32,
        DType::F64 => types::F64,
        DType::I32 => types::I32,
        DType::I64 => types::I64,
        DType::Bool => types::I8,
    }
}

/// State shared by every function of one compilation.
pub(crate) struct Shared<'m> {
    /// The module functions are declared and defined in (JIT or object).
    pub module: &'m mut dyn Module,
    pub func: &'m PrimFunc,
    /// Outlined functions are named `<prefix>_parallel<n>`.
    pub prefix: &'m str,
    pub options: CodegenOptions,
    /// Host functions declared in the module, by symbol.
    pub declared: HashMap<&'static str, FuncId>,
    /// Outlined functions made so far (for unique names).
    pub outlined: usize,
    /// A host function declared up front (`tessera_free`).
    pub fallback: FuncId,
    /// Buffer by the id of its handle tensor (see [`PrimFunc::handle_map`]).
    pub handles: HashMap<TensorId, BufferId>,
}

impl Shared<'_> {
    fn cranelift_error(e: impl std::fmt::Display) -> CodegenError {
        CodegenError::Cranelift(e.to_string())
    }

    /// Declares (once) an imported host function.
    pub fn declare_import(
        &mut self,
        symbol: &'static str,
        params: &[Type],
        ret: Option<Type>,
    ) -> Result<FuncId, CodegenError> {
        if let Some(id) = self.declared.get(symbol) {
            return Ok(*id);
        }
        let mut sig = self.module.make_signature();
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig.returns.extend(ret.map(AbiParam::new));
        let id = self
            .module
            .declare_function(symbol, Linkage::Import, &sig)
            .map_err(Shared::cranelift_error)?;
        self.declared.insert(symbol, id);
        Ok(id)
    }
}

/// Imported functions of one Cranelift function.
pub(crate) struct FnImports<'s, 'm> {
    pub shared: &'s mut Shared<'m>,
    refs: HashMap<&'static str, FuncRef>,
    /// The first failure to import, reported after translation.
    pub error: Option<CodegenError>,
}

impl FnImports<'_, '_> {
    pub fn get(
        &mut self,
        b: &mut FunctionBuilder,
        symbol: &'static str,
        params: &[Type],
        ret: Option<Type>,
    ) -> Result<FuncRef, CodegenError> {
        if let Some(r) = self.refs.get(symbol) {
            return Ok(*r);
        }
        let id = self.shared.declare_import(symbol, params, ret)?;
        let r = self.shared.module.declare_func_in_func(id, b.func);
        self.refs.insert(symbol, r);
        Ok(r)
    }
}

impl Imports for FnImports<'_, '_> {
    fn import(
        &mut self,
        builder: &mut FunctionBuilder,
        symbol: &'static str,
        params: &[Type],
        ret: Type,
    ) -> FuncRef {
        match self.get(builder, symbol, params, Some(ret)) {
            Ok(r) => r,
            Err(e) => {
                // Keep the builder consistent with a reference to a function
                // that always exists; the recorded error fails the compilation.
                self.error.get_or_insert(e);
                let fallback = self.shared.fallback;
                self.shared
                    .module
                    .declare_func_in_func(fallback, builder.func)
            }
        }
    }
}

/// How a loop-IR variable is known in the function being built.
#[derive(Clone, Copy)]
pub(crate) enum Binding {
    /// A compile-time constant (an unrolled loop's iteration).
    Const(i64),
    /// A Cranelift variable (a loop counter).
    Var(Variable),
    /// An SSA value (a let, or a value captured by an outlined body).
    Value(Value),
}

/// Builds one Cranelift function from a statement tree.
pub(crate) struct FnTranslator<'a, 's, 'm> {
    pub b: FunctionBuilder<'a>,
    pub imports: FnImports<'s, 'm>,
    pub env: HashMap<VarId, Binding>,
    pub storage: HashMap<BufferId, Storage>,
    /// Whether this function is an outlined parallel body (nested parallel
    /// loops then run serially).
    pub in_parallel: bool,
    /// Heap blocks to free before returning.
    pub heap: Vec<Value>,
    /// The values each loop variable of an enclosing loop takes (what
    /// vector loads use to prove their range inside a buffer).
    pub index_ranges: HashMap<VarId, Interval>,
}

impl<'a, 's, 'm> FnTranslator<'a, 's, 'm> {
    pub fn new(b: FunctionBuilder<'a>, shared: &'s mut Shared<'m>, in_parallel: bool) -> Self {
        FnTranslator {
            b,
            imports: FnImports {
                shared,
                refs: HashMap::new(),
                error: None,
            },
            env: HashMap::new(),
            storage: HashMap::new(),
            in_parallel,
            heap: Vec::new(),
            index_ranges: HashMap::new(),
        }
    }

    pub fn func(&self) -> &'m PrimFunc {
        self.imports.shared.func
    }

    pub fn options(&self) -> CodegenOptions {
        self.imports.shared.options
    }

    /// Emits `s`.
    pub fn stmt(&mut self, s: &Stmt) -> Result<(), CodegenError> {
        match s {
            Stmt::Seq(items) => items.iter().try_for_each(|i| self.stmt(i)),
            Stmt::Store {
                buffer,
                indices,
                value,
            } => self.store(*buffer, indices, value),
            Stmt::IfThenElse {
                cond,
                then,
                otherwise,
            } => self.if_then_else(cond, then, otherwise.as_deref()),
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => {
                if *kind != ForKind::Unrolled {
                    self.index_ranges
                        .insert(var.id(), Interval::new(0, extent - 1));
                }
                self.for_loop(var, *extent, *kind, body)
            }
            Stmt::Allocate { buffer, body } => {
                self.enter_allocation(*buffer);
                self.stmt(body)
            }
            Stmt::Let { var, value, body } => {
                let v = self.expr(value, false)?;
                let v = self.materialize(v, value.dtype());
                self.env.insert(var.id(), Binding::Value(v));
                self.stmt(body)?;
                self.env.remove(&var.id());
                Ok(())
            }
            Stmt::MicroKernelCall(call) => self.micro_kernel_call(call),
            Stmt::RowMathCall(call) => self.row_math_call(call),
            Stmt::PackCall(call) => self.pack_call(call),
            Stmt::StencilCall(call) => self.stencil_call(call),
        }
    }

    /// `for var in 0..extent { body }` run as `kind` says.
    fn for_loop(
        &mut self,
        var: &crate::te::Var,
        extent: i64,
        kind: ForKind,
        body: &Stmt,
    ) -> Result<(), CodegenError> {
        match kind {
            ForKind::Unrolled => {
                for i in 0..extent {
                    self.env.insert(var.id(), Binding::Const(i));
                    self.stmt(body)?;
                }
                self.env.remove(&var.id());
                Ok(())
            }
            ForKind::Parallel if !self.in_parallel => self.parallel_loop(var, extent, body),
            ForKind::Vectorized => self.vector_loop(var, extent, body),
            _ => {
                let start = self.b.ins().iconst(types::I64, 0);
                let end = self.b.ins().iconst(types::I64, extent);
                self.serial_loop(var.id(), start, end, body)
            }
        }
    }

    /// `for var in start..end { body }`, assuming `start < end`.
    pub fn serial_loop(
        &mut self,
        var: VarId,
        start: Value,
        end: Value,
        body: &Stmt,
    ) -> Result<(), CodegenError> {
        let counter = self.b.declare_var(types::I64);
        self.b.def_var(counter, start);
        let body_block = self.b.create_block();
        let exit = self.b.create_block();
        self.b.ins().jump(body_block, &[]);
        self.b.switch_to_block(body_block);
        self.env.insert(var, Binding::Var(counter));
        self.stmt(body)?;
        self.env.remove(&var);
        let current = self.b.use_var(counter);
        let next = self.b.ins().iadd_imm_s(current, 1);
        self.b.def_var(counter, next);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, next, end);
        self.b.ins().brif(more, body_block, &[], exit, &[]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    fn if_then_else(
        &mut self,
        cond: &crate::te::Expr,
        then: &Stmt,
        otherwise: Option<&Stmt>,
    ) -> Result<(), CodegenError> {
        let c = match self.expr(cond, false)? {
            Val::Bool(true) => return self.stmt(then),
            Val::Bool(false) => return otherwise.map_or(Ok(()), |o| self.stmt(o)),
            dynamic => self.materialize(dynamic, DType::Bool),
        };
        let then_block = self.b.create_block();
        let else_block = self.b.create_block();
        let merge = self.b.create_block();
        self.b.ins().brif(c, then_block, &[], else_block, &[]);
        self.b.switch_to_block(then_block);
        self.stmt(then)?;
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(else_block);
        if let Some(o) = otherwise {
            self.stmt(o)?;
        }
        self.b.ins().jump(merge, &[]);
        self.b.switch_to_block(merge);
        Ok(())
    }

    /// Frees heap blocks and returns.
    pub fn finish(mut self) -> Result<(), CodegenError> {
        let heap = std::mem::take(&mut self.heap);
        if !heap.is_empty() {
            let free = self
                .imports
                .get(&mut self.b, "tessera_free", &[types::I64], None)?;
            for block in heap {
                self.b.ins().call(free, &[block]);
            }
        }
        self.b.ins().return_(&[]);
        self.b.seal_all_blocks();
        if let Some(e) = self.imports.error.take() {
            return Err(e);
        }
        let config = self.imports.shared.module.isa().frontend_config();
        self.b.finalize(config);
        Ok(())
    }
}
