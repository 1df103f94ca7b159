//! The `row_math` pass: a vectorised loop marked by a `row_math` step is
//! fissioned so that its f32 transcendental calls run through row
//! primitives. For a call `f(a(j))` in the loop `for j in 0..E { body }`:
//!
//! ```text
//! alloc T[E]
//! for j′ in 0..E vectorized { T[j′] = a(j′) }      (under the body's guards)
//! T[0..E] = f(T[0..E])                            (one RowMathCall)
//! for j in 0..E vectorized { body with f(a(j)) := T[j] }
//! ```
//!
//! one scratch row per call, innermost calls (whose argument holds no other
//! transcendental) first, repeated on the last loop until none is left.
//! Calls inside a branch of a `select` stay inline (their argument may be
//! valid only where the condition holds). Fission is legal only when `a(j)`
//! reads no buffer the body writes (it would read values the original loop
//! had not written yet); otherwise lowering refuses with an error naming
//! the stage and the buffer. Guards of split loops are kept in the first
//! loop, so it reads nothing out of bounds; elements of `T` a guard skips
//! are never read by the last loop.

use std::collections::{HashMap, HashSet};

use crate::runtime::micro_kernels::Isa;
use crate::schedule::ComputeAt;
use crate::te::{DType, Expr, ExprKind, IterKind, Var, VarId};

use super::super::ir::{Buffer, BufferId, ForKind, MemScope, RowMathCall, Stmt};
use super::super::passes::map_children;
use super::{LowerError, Lowering};

/// A loop marked by a `row_math` step.
#[derive(Clone)]
struct Mark {
    stage: String,
    isa: Isa,
}

impl Lowering<'_> {
    /// The pass: every marked loop fissioned (see the module docs).
    pub(crate) fn row_math_loops(&mut self) -> Result<(), LowerError> {
        let mut marks: HashMap<VarId, Mark> = HashMap::new();
        for (index, stage) in self.state.stages().iter().enumerate() {
            let Some(r) = stage.row_math else {
                continue;
            };
            let error = |reason: String| LowerError::RowMath {
                stage: stage.name.clone(),
                reason,
            };
            if stage.compute_at == ComputeAt::Inline {
                return Err(error("the stage is inlined and has no loops".into()));
            }
            self.state.row_math_loop(index, r.iter).map_err(error)?;
            let Some(var) = self.layouts[index].leaf_vars.get(&r.iter) else {
                return Err(error(
                    "the loop has no variable after bound inference".into(),
                ));
            };
            marks.insert(
                var.id(),
                Mark {
                    stage: stage.name.clone(),
                    isa: r.isa,
                },
            );
        }
        if marks.is_empty() {
            return Ok(());
        }
        let body = std::mem::replace(&mut self.body, Stmt::nop());
        self.body = self.fission_marked(body, &marks)?;
        Ok(())
    }

    fn fission_marked(
        &mut self,
        s: Stmt,
        marks: &HashMap<VarId, Mark>,
    ) -> Result<Stmt, LowerError> {
        match s {
            Stmt::For {
                var,
                extent,
                kind: ForKind::Vectorized,
                body,
            } if marks.contains_key(&var.id()) => {
                let mark = marks[&var.id()].clone();
                self.fission(var, extent, *body, &mark)
            }
            other => {
                let mut failure = None;
                let out = map_children(other, &mut |child| {
                    if failure.is_some() {
                        return child;
                    }
                    match self.fission_marked(child, marks) {
                        Ok(s) => s,
                        Err(e) => {
                            failure = Some(e);
                            Stmt::nop()
                        }
                    }
                });
                failure.map_or(Ok(out), Err)
            }
        }
    }

    /// `for var in 0..extent vectorized { body }` with its calls moved to
    /// row primitives, innermost first.
    fn fission(
        &mut self,
        var: Var,
        extent: i64,
        body: Stmt,
        mark: &Mark,
    ) -> Result<Stmt, LowerError> {
        let Some(call) = innermost_call(&body) else {
            return Ok(Stmt::For {
                var,
                extent,
                kind: ForKind::Vectorized,
                body: Box::new(body),
            });
        };
        let ExprKind::Call(function, args) = call.kind() else {
            unreachable!("innermost_call returns calls");
        };
        let argument = args[0].clone();
        let written = written_buffers(&body);
        let handles = self.handle_buffers();
        if let Some(b) = reads_any(&argument, &written, &handles) {
            return Err(LowerError::RowMath {
                stage: mark.stage.clone(),
                reason: format!(
                    "the argument of {}() reads buffer '{}', which the loop writes; the loop cannot be split",
                    function.name(),
                    self.buffers[b].name
                ),
            });
        }
        let name = self.fresh_name(&mark.stage, &format!("{}_row", function.name()));
        let scratch = self.add_buffer(Buffer::new(&name, &[extent], DType::F32, MemScope::Local));
        let scratch_handle = self.buffers[scratch].handle.clone();

        let fill_name = self.fresh_name(&mark.stage, &format!("{}.fill", var.name()));
        let fill_var = Var::new(fill_name, extent, IterKind::Spatial);
        let to_fill: HashMap<VarId, Expr> = [(var.id(), fill_var.expr())].into();
        let fill = project_fill(&body, &call, &argument, scratch, &var.expr())
            .map(|s| super::super::passes::map_exprs(s, &mut |e| e.substitute(&to_fill)))
            .unwrap_or_else(Stmt::nop);

        let result = scratch_handle.at([var.expr()]);
        let rest = super::super::passes::map_exprs(body, &mut |e| {
            e.rewrite(&mut |x| (x == &call).then(|| result.clone()))
        });
        let rest = self.fission(var, extent, rest, mark)?;
        Ok(Stmt::Allocate {
            buffer: scratch,
            body: Box::new(Stmt::Seq(vec![
                Stmt::For {
                    var: fill_var,
                    extent,
                    kind: ForKind::Vectorized,
                    body: Box::new(fill),
                },
                Stmt::RowMathCall(RowMathCall {
                    function: *function,
                    isa: mark.isa,
                    buffer: scratch,
                    count: extent,
                }),
                rest,
            ])),
        })
    }

    /// Buffer by the id of its handle tensor.
    fn handle_buffers(&self) -> HashMap<crate::te::TensorId, BufferId> {
        self.buffers
            .iter()
            .enumerate()
            .map(|(n, b)| (b.handle.id(), n))
            .collect()
    }
}

/// The first call in a store value of `body` whose argument holds no other
/// transcendental and that no `select` branch holds.
fn innermost_call(body: &Stmt) -> Option<Expr> {
    let mut found = None;
    body.visit(&mut |s| {
        if let (None, Stmt::Store { value, .. }) = (&found, s) {
            found = innermost_in(value);
        }
    });
    found
}

fn innermost_in(e: &Expr) -> Option<Expr> {
    match e.kind() {
        // A branch may be valid only where its condition holds.
        ExprKind::Select { cond, .. } => innermost_in(cond),
        ExprKind::Call(_, args) if crate::schedule::is_row_math_call(e).is_some() => args
            .iter()
            .find_map(innermost_in)
            .or_else(|| Some(e.clone())),
        _ => e.children().into_iter().find_map(innermost_in),
    }
}

/// The buffers `body` stores to.
fn written_buffers(body: &Stmt) -> HashSet<BufferId> {
    let mut out = HashSet::new();
    body.visit(&mut |s| {
        if let Stmt::Store { buffer, .. } = s {
            out.insert(*buffer);
        }
    });
    out
}

/// A buffer of `written` that `e` reads.
fn reads_any(
    e: &Expr,
    written: &HashSet<BufferId>,
    handles: &HashMap<crate::te::TensorId, BufferId>,
) -> Option<BufferId> {
    let mut hit = None;
    e.visit(&mut |x| {
        if let ExprKind::Read(t, _) = x.kind()
            && let Some(&b) = handles.get(&t.id())
            && written.contains(&b)
        {
            hit.get_or_insert(b);
        }
    });
    hit
}

/// `body` with each store holding `call` replaced by `scratch[j] = argument`
/// under the same guards, and every other store dropped; `None` when none is
/// left.
fn project_fill(
    body: &Stmt,
    call: &Expr,
    argument: &Expr,
    scratch: BufferId,
    j: &Expr,
) -> Option<Stmt> {
    let project = |s: &Stmt| project_fill(s, call, argument, scratch, j);
    match body {
        Stmt::Store { value, .. } if value.any(&mut |x| x == call) => Some(Stmt::Store {
            buffer: scratch,
            indices: vec![j.clone()],
            value: argument.clone(),
        }),
        Stmt::Store { .. }
        | Stmt::MicroKernelCall(_)
        | Stmt::RowMathCall(_)
        | Stmt::PackCall(_)
        | Stmt::StencilCall(_) => None,
        Stmt::Seq(items) => {
            let items: Vec<Stmt> = items.iter().filter_map(&project).collect();
            (!items.is_empty()).then_some(Stmt::Seq(items))
        }
        Stmt::IfThenElse {
            cond,
            then,
            otherwise,
        } => {
            let then = project(then);
            let otherwise = otherwise.as_deref().and_then(project);
            match (then, otherwise) {
                (None, None) => None,
                (then, otherwise) => Some(Stmt::IfThenElse {
                    cond: cond.clone(),
                    then: Box::new(then.unwrap_or_else(Stmt::nop)),
                    otherwise: otherwise.map(Box::new),
                }),
            }
        }
        Stmt::For {
            var,
            extent,
            kind,
            body,
        } => project(body).map(|b| Stmt::For {
            var: var.clone(),
            extent: *extent,
            kind: *kind,
            body: Box::new(b),
        }),
        Stmt::Allocate { buffer, body } => project(body).map(|b| Stmt::Allocate {
            buffer: *buffer,
            body: Box::new(b),
        }),
        Stmt::Let { var, value, body } => project(body).map(|b| Stmt::Let {
            var: var.clone(),
            value: value.clone(),
            body: Box::new(b),
        }),
    }
}
