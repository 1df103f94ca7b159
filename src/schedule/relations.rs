//! Loop extents and index values through split and fuse relations.

use std::collections::HashMap;

use crate::te::{Expr, floordiv, floormod};

use super::state::{IterId, Relation, Stage};

/// The extent of every loop of `stage` when its root loops have `root_extents`.
pub fn derive_extents(stage: &Stage, root_extents: &[i64]) -> Vec<i64> {
    let mut extents: Vec<i64> = stage.iters.iter().map(|it| it.extent).collect();
    extents[..root_extents.len()].copy_from_slice(root_extents);
    for relation in &stage.relations {
        match relation {
            Relation::Split {
                parent,
                children,
                factors,
            } => {
                let inner: i64 = factors.iter().product();
                extents[children[0]] = (extents[*parent] + inner - 1) / inner;
                for (child, factor) in children[1..].iter().zip(factors) {
                    extents[*child] = *factor;
                }
            }
            Relation::Fuse { parents, fused } => {
                extents[*fused] = parents.iter().map(|p| extents[*p]).product();
            }
        }
    }
    extents
}

/// The value of every loop of `stage` (roots included) given the values of
/// its current loops; `extents` as from [`derive_extents`].
pub fn derive_values(
    stage: &Stage,
    leaf_values: &HashMap<IterId, Expr>,
    extents: &[i64],
) -> HashMap<IterId, Expr> {
    let mut values = leaf_values.clone();
    for relation in stage.relations.iter().rev() {
        match relation {
            Relation::Split {
                parent,
                children,
                factors,
            } => {
                let value_of =
                    |id: &IterId| values.get(id).cloned().unwrap_or_else(|| Expr::i64(0));
                let mut v = value_of(&children[0]);
                for (child, factor) in children[1..].iter().zip(factors) {
                    v = v * *factor + value_of(child);
                }
                values.insert(*parent, v);
            }
            Relation::Fuse { parents, fused } => {
                let f = values.get(fused).cloned().unwrap_or_else(|| Expr::i64(0));
                let mut stride = 1;
                for (k, p) in parents.iter().enumerate().rev() {
                    let shifted = if stride == 1 {
                        f.clone()
                    } else {
                        floordiv(&f, stride)
                    };
                    let v = if k == 0 {
                        shifted
                    } else {
                        floormod(shifted, extents[*p])
                    };
                    values.insert(*p, v);
                    stride *= extents[*p];
                }
            }
        }
    }
    values
}
