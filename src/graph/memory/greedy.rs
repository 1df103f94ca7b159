//! Greedy-by-size placement of blocks with lifetimes into one arena
//! (TFLite's `GreedyBySizePlanner`, ONNX Runtime's best-fit planner): the
//! largest block first, each into the smallest gap between the placed blocks
//! whose lifetimes intersect its own, or above them all.

/// Alignment of every block's offset and size in the arena, in bytes (a
/// cache line, as [`NdBuffer`](crate::runtime::NdBuffer) aligns buffers).
pub const ARENA_ALIGN: usize = 64;

/// The steps (node indices, both ends included) during which a block holds
/// a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    /// The node that writes it.
    pub first: usize,
    /// The last node that reads it (one past the last node for values that
    /// must survive the run).
    pub last: usize,
}

impl Lifetime {
    /// Whether both are live at some step.
    pub fn intersects(&self, other: &Lifetime) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

/// A block to place: its size and when it is live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Size in bytes (rounded up to [`ARENA_ALIGN`] when placed).
    pub bytes: usize,
    /// When it is live.
    pub lifetime: Lifetime,
}

/// `bytes` rounded up to a multiple of [`ARENA_ALIGN`].
pub fn aligned(bytes: usize) -> usize {
    bytes.div_ceil(ARENA_ALIGN) * ARENA_ALIGN
}

/// The offset of each block (in `blocks` order) and the arena's size.
///
/// Every offset is a multiple of [`ARENA_ALIGN`]; two blocks whose
/// lifetimes intersect never share a byte.
pub fn place(blocks: &[Block]) -> (Vec<usize>, usize) {
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    // Largest first; ties by who is written first, then by index, so the
    // plan is the same on every run.
    order.sort_by_key(|&i| {
        (
            std::cmp::Reverse(aligned(blocks[i].bytes)),
            blocks[i].lifetime.first,
            i,
        )
    });
    let mut offsets = vec![0usize; blocks.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(blocks.len());
    let mut arena = 0usize;
    for i in order {
        let size = aligned(blocks[i].bytes);
        let mut busy: Vec<(usize, usize)> = placed
            .iter()
            .filter(|&&j| blocks[j].lifetime.intersects(&blocks[i].lifetime))
            .map(|&j| (offsets[j], offsets[j] + aligned(blocks[j].bytes)))
            .collect();
        busy.sort_unstable();
        // The smallest gap that fits (the lowest such on ties), else the top.
        let mut best: Option<(usize, usize)> = None; // (gap size, offset)
        let mut free_from = 0usize;
        for &(start, end) in &busy {
            if start >= free_from + size {
                let gap = start - free_from;
                if best.is_none_or(|(g, _)| gap < g) {
                    best = Some((gap, free_from));
                }
            }
            free_from = free_from.max(end);
        }
        let offset = best.map_or(free_from, |(_, offset)| offset);
        offsets[i] = offset;
        arena = arena.max(offset + size);
        placed.push(i);
    }
    (offsets, arena)
}

/// The largest sum of the bytes of blocks live at one step: no arena can be
/// smaller.
pub fn lower_bound(blocks: &[Block]) -> usize {
    let steps = blocks
        .iter()
        .map(|b| b.lifetime.last + 1)
        .max()
        .unwrap_or(0);
    // +bytes where a block starts, −bytes after it ends.
    let mut delta = vec![0i128; steps + 1];
    for b in blocks {
        delta[b.lifetime.first] += b.bytes as i128;
        delta[b.lifetime.last + 1] -= b.bytes as i128;
    }
    let (mut live, mut most) = (0i128, 0i128);
    for d in delta {
        live += d;
        most = most.max(live);
    }
    most as usize
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    use super::*;

    fn block(bytes: usize, first: usize, last: usize) -> Block {
        Block {
            bytes,
            lifetime: Lifetime { first, last },
        }
    }

    /// The checks every plan must pass.
    fn check(blocks: &[Block], offsets: &[usize], arena: usize) {
        for (i, a) in blocks.iter().enumerate() {
            assert_eq!(offsets[i] % ARENA_ALIGN, 0, "block {i} is misaligned");
            assert!(offsets[i] + a.bytes <= arena, "block {i} leaves the arena");
            for (j, b) in blocks.iter().enumerate().skip(i + 1) {
                if a.lifetime.intersects(&b.lifetime) {
                    let apart =
                        offsets[i] + a.bytes <= offsets[j] || offsets[j] + b.bytes <= offsets[i];
                    assert!(
                        apart,
                        "blocks {i} {a:?}@{} and {j} {b:?}@{} overlap",
                        offsets[i], offsets[j]
                    );
                }
            }
        }
        assert!(arena >= lower_bound(blocks));
    }

    #[test]
    fn blocks_live_at_different_times_share_memory() {
        let blocks = [block(1000, 0, 1), block(1000, 2, 3), block(500, 1, 2)];
        let (offsets, arena) = place(&blocks);
        check(&blocks, &offsets, arena);
        assert_eq!(offsets[0], offsets[1]);
        assert_eq!(arena, aligned(1000) + aligned(500));
        assert_eq!(lower_bound(&blocks), 1500);
    }

    #[test]
    fn a_block_takes_the_smallest_gap_that_fits() {
        // Two long-lived separators leave gaps of 256 bytes (at 0) and 128
        // bytes (at 448) among the blocks live with the last one; its 100
        // bytes go into the 128-byte gap, not the lowest one.
        let blocks = [
            block(256, 0, 0),
            block(192, 0, 9),
            block(128, 0, 0),
            block(128, 0, 9),
            block(100, 5, 6),
        ];
        let (offsets, arena) = place(&blocks);
        check(&blocks, &offsets, arena);
        assert_eq!(offsets[..4], [0, 256, 448, 576]);
        assert_eq!(offsets[4], 448);
    }

    #[test]
    fn random_lifetimes_and_sizes_never_overlap_and_stay_near_the_bound() {
        let mut rng = StdRng::seed_from_u64(24);
        let mut worst: f64 = 1.0;
        for _ in 0..300 {
            let steps = rng.random_range(1..40);
            let n = rng.random_range(0..60);
            let blocks: Vec<Block> = (0..n)
                .map(|_| {
                    let first = rng.random_range(0..steps);
                    let last = rng.random_range(first..steps);
                    block(rng.random_range(1..5000), first, last)
                })
                .collect();
            let (offsets, arena) = place(&blocks);
            check(&blocks, &offsets, arena);
            if n > 0 {
                worst = worst.max(arena as f64 / lower_bound(&blocks) as f64);
            }
        }
        // Random interval graphs are harder than real models; greedy by
        // size stays well within 2× of the bound on them.
        assert!(worst < 2.0, "worst arena / lower bound {worst}");
    }
}
