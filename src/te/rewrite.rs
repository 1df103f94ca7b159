//! Rewriting expressions: substitution of variables and of whole sub-trees.

use std::collections::HashMap;

use super::expr::{Expr, ExprKind, Reduce};
use super::ids::VarId;

impl Expr {
    /// A copy of this node with its children replaced (same order as
    /// [`Expr::children`]); `self` itself when nothing changed.
    pub fn with_children(&self, children: Vec<Expr>) -> Expr {
        let unchanged = self
            .children()
            .into_iter()
            .zip(&children)
            .all(|(old, new)| old == new);
        if unchanged {
            return self.clone();
        }
        let mut it = children.into_iter();
        let mut next = || it.next().unwrap_or_else(|| Expr::i64(0));
        let kind = match self.kind() {
            ExprKind::Const(_) | ExprKind::Var(_) => return self.clone(),
            ExprKind::Neg(_) => ExprKind::Neg(next()),
            ExprKind::Not(_) => ExprKind::Not(next()),
            ExprKind::Cast(_) => ExprKind::Cast(next()),
            ExprKind::Binary(op, ..) => ExprKind::Binary(*op, next(), next()),
            ExprKind::Cmp(op, ..) => ExprKind::Cmp(*op, next(), next()),
            ExprKind::Select { .. } => ExprKind::Select {
                cond: next(),
                then: next(),
                otherwise: next(),
            },
            ExprKind::Call(f, args) => ExprKind::Call(*f, args.iter().map(|_| next()).collect()),
            ExprKind::Read(t, idx) => {
                ExprKind::Read(t.clone(), idx.iter().map(|_| next()).collect())
            }
            ExprKind::Reduce(r) => ExprKind::Reduce(Reduce {
                op: r.op,
                source: next(),
                axes: r.axes.clone(),
            }),
        };
        Expr::new(self.dtype(), kind)
    }

    /// Rebuilds the tree top-down: where `f` returns a replacement, it is used
    /// as is (not visited further); elsewhere the children are rewritten.
    pub fn rewrite(&self, f: &mut dyn FnMut(&Expr) -> Option<Expr>) -> Expr {
        if let Some(replacement) = f(self) {
            return replacement;
        }
        let children: Vec<Expr> = self.children().into_iter().map(|c| c.rewrite(f)).collect();
        self.with_children(children)
    }

    /// Replaces variables by expressions (keyed by [`Var::id`](super::Var::id)).
    pub fn substitute(&self, map: &HashMap<VarId, Expr>) -> Expr {
        if map.is_empty() {
            return self.clone();
        }
        self.rewrite(&mut |e| match e.kind() {
            ExprKind::Var(v) => map.get(&v.id()).cloned(),
            _ => None,
        })
    }

    /// Whether any sub-expression satisfies `pred`.
    pub fn any(&self, pred: &mut dyn FnMut(&Expr) -> bool) -> bool {
        if pred(self) {
            return true;
        }
        self.children().into_iter().any(|c| c.any(pred))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::te::{DType, placeholder, reduce_axis};

    #[test]
    fn substitute_replaces_variables_and_keeps_the_rest() {
        let a = placeholder("A", &[8], DType::F32);
        let i = reduce_axis(8, "i");
        let j = reduce_axis(8, "j");
        let e = a.at([&i + 1]) * 2.0;
        let mut map = HashMap::new();
        let i = i.as_var().expect("a reduce axis is a variable");
        map.insert(i.id(), &j * 2);
        assert_eq!(e.substitute(&map).to_string(), "(A[((j * 2) + 1)] * 2.0)");
        assert_eq!(e.substitute(&HashMap::new()), e);
    }
}
