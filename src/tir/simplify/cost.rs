//! The extraction cost: fewest [`Expr`](crate::te::Expr) nodes first, then
//! fewest divisions and modulos.

use egg::{CostFunction, Id, Language};

use super::language::IndexLang;

/// `(nodes, divisions)`, compared lexicographically.
pub(super) type Cost = (usize, usize);

/// Counts the nodes the extracted term will have as an expression tree
/// (an opaque leaf counts its own nodes), then its divisions.
pub(super) struct TreeSize<'a> {
    /// Node count of each leaf slot.
    pub leaf_sizes: &'a [usize],
}

impl CostFunction<IndexLang> for TreeSize<'_> {
    type Cost = Cost;

    fn cost<C>(&mut self, enode: &IndexLang, mut costs: C) -> Cost
    where
        C: FnMut(Id) -> Cost,
    {
        let own = match enode {
            IndexLang::Leaf(slot) => (
                self.leaf_sizes.get(slot.0 as usize).copied().unwrap_or(1),
                0,
            ),
            node if node.is_division() => (1, 1),
            _ => (1, 0),
        };
        enode.fold(own, |(n, d), child| {
            let (cn, cd) = costs(child);
            (n.saturating_add(cn), d.saturating_add(cd))
        })
    }
}
