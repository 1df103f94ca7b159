//! What a sketch is: a schedule with its numbers left open — fixed steps,
//! tiles whose factors annotation samples, and the sites where annotation
//! decides parallel loops, vectorization and unrolling.

use crate::runtime::micro_kernels::Isa;
use crate::schedule::Step;

/// One step of a sketch: fixed, or a split whose factors annotation chooses.
#[derive(Clone, Debug, PartialEq)]
pub enum SketchStep {
    /// A step as it is.
    Fixed(Step),
    /// Split `iter` of `stage` (of extent `extent`) by `parts` sampled factors.
    Tile {
        /// The stage.
        stage: String,
        /// The loop.
        iter: String,
        /// Its extent.
        extent: i64,
        /// Inner factors to sample.
        parts: usize,
        /// What the loop is to the tiling (guides sampling).
        role: TileRole,
    },
    /// A sampled factor that no split of its own uses (a [`SketchStep::Follow`]
    /// takes it); `extent` bounds it.
    Factor {
        /// The extent the factor divides.
        extent: i64,
    },
    /// Split `iter` of `stage` by two factors: the `outer`-th tile's one
    /// factor (a [`SketchStep::Factor`]), then the product of the factors
    /// of the `tile`-th tile — a consumer whose inner loops cover exactly
    /// one tile of its producer, and whose middle loops block for the cache.
    Follow {
        /// The stage.
        stage: String,
        /// The loop.
        iter: String,
        /// Index of the tile followed, among the sketch's tiles.
        tile: usize,
        /// Index of the free factor, among the sketch's tiles.
        outer: usize,
    },
}

/// What a tiled loop is, so that annotation can sample register-sized tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileRole {
    /// A spatial axis of a multi-level tiling; `vector` for the innermost
    /// one, which annotation vectorizes.
    Spatial {
        /// The innermost spatial axis.
        vector: bool,
    },
    /// A reduction axis of a multi-level tiling.
    Reduce,
    /// Any other split (vectorization of a simple stage, rfactor).
    Plain,
    /// A free factor taken by a [`SketchStep::Follow`].
    Free,
    /// The depth (kc) of a tensorized block: a divisor of the extent in the
    /// range a micro-kernel call amortises well.
    KernelDepth,
    /// The depth of one reduction chunk of a tensorized block whose
    /// reduction loops run outside the tiles it accumulates: a divisor in
    /// the range where a chunk of the packed operand stays in L1.
    KernelChunk,
}

/// How annotation may treat a stage's loops once the sketch is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AnnotationSite {
    /// The stage.
    pub stage: String,
    /// Its leading spatial loops may be fused into one parallel loop.
    pub parallel: bool,
    /// Its innermost loop may be vectorized (a spatial one when short, a
    /// reduction one lane-wise).
    pub vectorize: bool,
    /// It may get an `auto_unroll_max_step` pragma.
    pub unroll: bool,
    /// Its loops inside the deepest stage computed at it (one tile of a
    /// cache-write or fused producer) are unrolled when that tile is small
    /// enough to live in registers: register promotion needs every access
    /// to the tile at a constant index.
    pub unroll_tile: bool,
    /// The row-math ISAs annotation may run the stage's transcendental
    /// calls with (a `row_math` step on its vectorised innermost loop);
    /// empty where the stage calls none or the target allows none.
    pub row_math: Vec<Isa>,
    /// The ISAs whose packing routine annotation may run the stage's copy
    /// with (a `pack` step on its two innermost loops); empty where the
    /// stage is no packing copy.
    pub pack: Vec<Isa>,
    /// The stage is a (padded) copy: its innermost loop may be vectorized
    /// at any length, not only when short, since code generation runs the
    /// contiguous run of a vectorized copy as one copy call.
    pub copy: bool,
}

/// A schedule with its numbers left open.
#[derive(Clone, Debug, PartialEq)]
pub struct Sketch {
    /// The rules that made it, e.g. `C:tile+cache_write`.
    pub name: String,
    /// The steps.
    pub steps: Vec<SketchStep>,
    /// Where annotation decides parallel / vectorize / unroll.
    pub sites: Vec<AnnotationSite>,
}

impl Sketch {
    /// Whether the sketch calls a micro-kernel (has a `tensorize` step).
    pub fn is_tensorized(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, SketchStep::Fixed(Step::Tensorize { .. })))
    }

    /// The tile and factor steps, in order: (extent, factors) of each
    /// (annotation samples one factor list each).
    pub fn tiles(&self) -> Vec<(i64, usize)> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                SketchStep::Tile { extent, parts, .. } => Some((*extent, *parts)),
                SketchStep::Factor { extent } => Some((*extent, 1)),
                _ => None,
            })
            .collect()
    }
}

impl Sketch {
    /// The role of each tile and factor step, in the order of [`Sketch::tiles`].
    pub fn tile_roles(&self) -> Vec<TileRole> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                SketchStep::Tile { role, .. } => Some(*role),
                SketchStep::Factor { .. } => Some(TileRole::Free),
                _ => None,
            })
            .collect()
    }

    /// For each [`SketchStep::Follow`]: (its free factor's slot, the slot of
    /// the tile it follows, the loop extent), slots indexing [`Sketch::tiles`].
    pub fn follow_links(&self) -> Vec<(usize, usize, i64)> {
        let extents = self.tiles();
        self.steps
            .iter()
            .filter_map(|s| match s {
                SketchStep::Follow { tile, outer, .. } => {
                    Some((*outer, *tile, extents.get(*outer).map_or(1, |e| e.0)))
                }
                _ => None,
            })
            .collect()
    }
}

/// The site of `stage` with the given freedoms (no tile unrolling).
pub(super) fn site(stage: &str, parallel: bool, vectorize: bool, unroll: bool) -> AnnotationSite {
    AnnotationSite {
        stage: stage.into(),
        parallel,
        vectorize,
        unroll,
        unroll_tile: false,
        row_math: Vec::new(),
        pack: Vec::new(),
        copy: false,
    }
}

/// The site of a padded copy of an input, computed inside the loops of
/// the stage that reads it (not parallel itself; vectorized at any length).
pub(super) fn padding_site(stage: &str) -> AnnotationSite {
    AnnotationSite {
        copy: true,
        ..site(stage, false, true, true)
    }
}

/// The site of a consumer that copies out (or finishes) one producer tile
/// per iteration of its inner loops.
pub(super) fn tile_consumer_site(stage: &str) -> AnnotationSite {
    AnnotationSite {
        unroll_tile: true,
        ..site(stage, true, true, false)
    }
}
