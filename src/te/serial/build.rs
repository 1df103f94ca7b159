//! Rebuilding a [`ComputeDag`] from its [`DagSpec`]: each stage's variables
//! are created once and looked up by name, reads resolve to earlier tensors,
//! and the result goes through the ordinary DAG check.

use super::{ConstValue, DagSpec, ExprSpec, SpecError, TensorSpec};
use crate::te::dag::ComputeDag;
use crate::te::dtype::DType;
use crate::te::expr::{Const, Expr, ExprKind, IterKind, Reduce, Var};
use crate::te::tensor::{ComputeOp, Tensor, placeholder};

impl ComputeDag {
    /// Rebuilds the DAG `spec` describes, with the names, label and tensor
    /// order it gives. Errors name the stage at fault (see [`SpecError`]);
    /// whatever [`ComputeDag::new`] rejects comes back as [`SpecError::Dag`].
    pub fn from_spec(spec: &DagSpec) -> Result<ComputeDag, SpecError> {
        let mut built: Vec<Tensor> = Vec::with_capacity(spec.tensors.len());
        for (position, t) in spec.tensors.iter().enumerate() {
            let tensor = match t {
                TensorSpec::Placeholder { name, shape, dtype } => placeholder(name, shape, *dtype),
                TensorSpec::Compute {
                    name,
                    shape,
                    dtype,
                    axes,
                    body,
                } => build_stage(name, shape, *dtype, axes, body, position, &built)?,
            };
            built.push(tensor);
        }
        let mut outputs = Vec::with_capacity(spec.outputs.len());
        for (output, &position) in spec.outputs.iter().enumerate() {
            let tensor = built.get(position).ok_or(SpecError::BadOutput {
                output,
                position,
                count: built.len(),
            })?;
            outputs.push(tensor.clone());
        }
        let inputs: Vec<Tensor> = built
            .iter()
            .filter(|t| t.is_placeholder())
            .cloned()
            .collect();
        let dag = ComputeDag::new(&inputs, &outputs)?.with_label(spec.label.clone());
        check_order(&dag, &built, spec)?;
        Ok(dag)
    }
}

/// The rebuilt DAG must hold the spec's tensors at the spec's positions, so
/// that positions (and stage order) mean the same on both sides.
fn check_order(dag: &ComputeDag, built: &[Tensor], spec: &DagSpec) -> Result<(), SpecError> {
    for (position, t) in built.iter().enumerate() {
        let found = dag.tensors().get(position);
        if found != Some(t) {
            return Err(SpecError::Order {
                position,
                name: spec.tensors[position].name().to_string(),
                found: found.map_or("nothing (no output needs this stage)".into(), |f| {
                    format!("'{}'", f.name())
                }),
            });
        }
    }
    Ok(())
}

fn build_stage(
    name: &str,
    shape: &[i64],
    dtype: DType,
    axes: &[String],
    body: &ExprSpec,
    position: usize,
    tensors: &[Tensor],
) -> Result<Tensor, SpecError> {
    if axes.len() != shape.len() {
        return Err(SpecError::AxisCount {
            stage: name.into(),
            axes: axes.len(),
            rank: shape.len(),
        });
    }
    let mut scope = Scope {
        stage: name,
        position,
        tensors,
        vars: Vec::new(),
    };
    for (axis, &extent) in axes.iter().zip(shape) {
        scope.bind(Var::new(axis.clone(), extent, IterKind::Spatial))?;
    }
    let spatial: Vec<Var> = scope.vars.clone();
    let body = scope.expr(body)?;
    if body.dtype() != dtype {
        return Err(SpecError::StageDtype {
            stage: name.into(),
            declared: dtype,
            body: body.dtype(),
        });
    }
    Ok(Tensor::from_compute(
        name,
        shape,
        ComputeOp {
            axes: spatial,
            body,
        },
    ))
}

/// The variables visible while building one stage's body.
struct Scope<'a> {
    stage: &'a str,
    position: usize,
    tensors: &'a [Tensor],
    vars: Vec<Var>,
}

impl Scope<'_> {
    fn bind(&mut self, var: Var) -> Result<(), SpecError> {
        if self.vars.iter().any(|v| v.name() == var.name()) {
            return Err(SpecError::DuplicateAxis {
                stage: self.stage.into(),
                name: var.name().into(),
            });
        }
        self.vars.push(var);
        Ok(())
    }

    fn lookup(&self, name: &str) -> Result<Expr, SpecError> {
        match self.vars.iter().find(|v| v.name() == name) {
            Some(v) => Ok(v.expr()),
            None => {
                let names: Vec<String> = self
                    .vars
                    .iter()
                    .map(|v| format!("`{}`", v.name()))
                    .collect();
                Err(SpecError::UnknownVariable {
                    stage: self.stage.into(),
                    name: name.into(),
                    available: if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    },
                })
            }
        }
    }

    fn expr(&mut self, e: &ExprSpec) -> Result<Expr, SpecError> {
        let node = |dtype: DType, kind: ExprKind| Ok(Expr::new(dtype, kind));
        match e {
            ExprSpec::Const { dtype, value } => {
                let c = self.constant(*dtype, value)?;
                node(*dtype, ExprKind::Const(c))
            }
            ExprSpec::Var { name } => self.lookup(name),
            ExprSpec::Neg { a } => {
                let a = self.expr(a)?;
                node(a.dtype(), ExprKind::Neg(a))
            }
            ExprSpec::Not { a } => {
                let a = self.expr(a)?;
                node(DType::Bool, ExprKind::Not(a))
            }
            ExprSpec::Binary { binop, a, b } => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                node(a.dtype(), ExprKind::Binary(*binop, a, b))
            }
            ExprSpec::Cmp { cmp, a, b } => {
                let (a, b) = (self.expr(a)?, self.expr(b)?);
                node(DType::Bool, ExprKind::Cmp(*cmp, a, b))
            }
            ExprSpec::Select {
                cond,
                then,
                otherwise,
            } => {
                let cond = self.expr(cond)?;
                let then = self.expr(then)?;
                let otherwise = self.expr(otherwise)?;
                node(
                    then.dtype(),
                    ExprKind::Select {
                        cond,
                        then,
                        otherwise,
                    },
                )
            }
            ExprSpec::Cast { dtype, a } => {
                let a = self.expr(a)?;
                node(*dtype, ExprKind::Cast(a))
            }
            ExprSpec::Call { func, args } => {
                if args.len() != func.arity() {
                    return Err(SpecError::Arity {
                        stage: self.stage.into(),
                        func: func.name(),
                        expected: func.arity(),
                        got: args.len(),
                    });
                }
                let args = args
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>, _>>()?;
                node(args[0].dtype(), ExprKind::Call(*func, args))
            }
            ExprSpec::Read { tensor, indices } => {
                let source = match self.tensors.get(*tensor) {
                    Some(t) if *tensor < self.position => t.clone(),
                    _ => {
                        return Err(SpecError::BadRead {
                            stage: self.stage.into(),
                            position: self.position,
                            tensor: *tensor,
                            last: self
                                .position
                                .checked_sub(1)
                                .map_or("none".into(), |p| p.to_string()),
                        });
                    }
                };
                let indices = indices
                    .iter()
                    .map(|i| self.expr(i))
                    .collect::<Result<Vec<_>, _>>()?;
                node(source.dtype(), ExprKind::Read(source, indices))
            }
            ExprSpec::Reduce {
                reducer,
                axes,
                source,
            } => {
                let outer = self.vars.len();
                let mut reduce_axes = Vec::with_capacity(axes.len());
                for axis in axes {
                    let var = Var::new(axis.name.clone(), axis.extent, IterKind::Reduce);
                    self.bind(var.clone())?;
                    reduce_axes.push(var);
                }
                let source = self.expr(source);
                self.vars.truncate(outer);
                let source = source?;
                node(
                    source.dtype(),
                    ExprKind::Reduce(Reduce {
                        op: *reducer,
                        source,
                        axes: reduce_axes,
                    }),
                )
            }
        }
    }

    fn constant(&self, dtype: DType, value: &ConstValue) -> Result<Const, SpecError> {
        let c = match (dtype, value) {
            (DType::Bool, ConstValue::Bool(b)) => Some(Const::Bool(*b)),
            (DType::I64, ConstValue::Int(v)) => Some(Const::Int(*v)),
            (DType::I32, ConstValue::Int(v)) => i32::try_from(*v).ok().map(|_| Const::Int(*v)),
            (d, ConstValue::Int(v)) if d.is_float() => Some(float(d, *v as f64)),
            (d, ConstValue::Float(v)) if d.is_float() => Some(float(d, *v)),
            (d, ConstValue::Special(s)) if d.is_float() => match s.as_str() {
                "inf" => Some(Const::Float(f64::INFINITY)),
                "-inf" => Some(Const::Float(f64::NEG_INFINITY)),
                "nan" => Some(Const::Float(f64::NAN)),
                _ => None,
            },
            _ => None,
        };
        c.ok_or_else(|| SpecError::BadConstant {
            stage: self.stage.into(),
            dtype,
            value: serde_json::to_string(value).unwrap_or_default(),
        })
    }
}

/// A float constant rounded to `dtype`, as [`Expr::constant`] makes it.
fn float(dtype: DType, v: f64) -> Const {
    match dtype {
        DType::F32 => Const::Float(v as f32 as f64),
        _ => Const::Float(v),
    }
}
