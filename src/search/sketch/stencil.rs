//! The stencil rule: a windowed product reduction whose weights do not move
//! along the output row (a depthwise convolution,
//! `out[c, y, x] = Σ_{r,s} in[c, y+r, x+s] · w[c, r, s]`) gets sketches
//! whose output rows are each one call of a stencil primitive
//! (`runtime::stencil`) over the whole window, at the machine's full
//! vector width: computed in place, or row by row inside its fused
//! elementwise consumer (bias + clip), with a padded input computed once
//! per plane of the host. Offered beside the tiled sketches, not instead.

use crate::runtime::Target;
use crate::runtime::stencil;
use crate::schedule::Step;
use crate::te::{ComputeOp, Var};

use super::stage::{Stage, sum_of_product, uses};
use super::{Condition, SketchRule, SketchStep, Variant, VariantKind, padding_site, site};

/// The stencil roles of a stage's axes and operands.
struct StencilShape {
    /// The output row: the innermost output axis, read by the input only.
    row: Var,
    /// The axis of the output rows (the one outside `row`), if any: a
    /// fused consumer computes the stage at its loop over it.
    rows: Option<Var>,
    /// The axis outside `rows` (a channel): padding is computed per plane.
    plane: Option<Var>,
    /// The window's two reduction axes, outer first.
    window: [Var; 2],
    /// Operands computed by other stages (padding), which must be buffers.
    materialize: Vec<String>,
}

/// The stencil roles of `op`, when it is an f32 sum of the product of two
/// tensor reads, one (the input) moving along the innermost output axis and
/// the other (the weights) not, over a window of two reduction axes and
/// nothing else longer than 1.
fn stencil_shape(op: &ComputeOp) -> Option<StencilShape> {
    let reduction = op.reduction()?;
    let [x, y] = sum_of_product(op)?;
    let row_position = op.axes.iter().rposition(|a| a.extent() > 1)?;
    let row = op.axes[row_position].clone();
    let (input, weight) = match (uses(&x.1, &row), uses(&y.1, &row)) {
        (true, false) => (x, y),
        (false, true) => (y, x),
        _ => return None,
    };
    // The window: the last two reduction axes the input reads beside an
    // output axis (sliding with it: `y + r`, not a channel `rc`), at least
    // one of them longer than 1 (else it is no window).
    let slides = |r: &Var| {
        input.1.iter().any(|index| {
            let one = std::slice::from_ref(index);
            uses(one, r) && op.axes.iter().any(|a| uses(one, a))
        })
    };
    let windowed: Vec<&Var> = reduction.axes.iter().filter(|r| slides(r)).collect();
    let [outer, inner] = windowed.get(windowed.len().checked_sub(2)?..)? else {
        return None;
    };
    if outer.extent() * inner.extent() <= 1 || !uses(&weight.1, outer) || !uses(&weight.1, inner) {
        return None;
    }
    // Nothing summed outside the window (a convolution's input channels):
    // that is a GEMM, for the micro-kernels.
    let window_ids = [outer.id(), inner.id()];
    if reduction
        .axes
        .iter()
        .any(|r| r.extent() > 1 && !window_ids.contains(&r.id()))
    {
        return None;
    }
    let rows = row_position.checked_sub(1).map(|p| op.axes[p].clone());
    let plane = row_position.checked_sub(2).map(|p| op.axes[p].clone());
    let materialize = [&input.0, &weight.0]
        .into_iter()
        .filter(|t| t.compute_op().is_some())
        .map(|t| t.name().to_string())
        .collect();
    Some(StencilShape {
        row,
        rows,
        plane,
        window: [(*outer).clone(), (*inner).clone()],
        materialize,
    })
}

/// The stencil rule (none when `target` allows no stencil primitive).
pub(super) struct StencilRows;

impl SketchRule for StencilRows {
    fn name(&self) -> &'static str {
        "stencil_rows"
    }

    fn condition(&self, stage: &Stage) -> Condition {
        Condition::Apply.when(stage.has_data_reuse() && stencil_shape(&stage.op).is_some())
    }

    fn apply(&self, stage: &Stage, target: &Target) -> Vec<Variant> {
        let Some(shape) = stencil_shape(&stage.op) else {
            return Vec::new();
        };
        let Some(isa) = stencil::allowed_isas(target).into_iter().max() else {
            return Vec::new();
        };
        let Some(primitive) = stencil::primitive_for(isa) else {
            return Vec::new();
        };
        let mut variants = vec![stencil_variant(stage, &shape, primitive.name, None)];
        if let Some(consumer) = &stage.fusible_consumer {
            variants.push(stencil_variant(
                stage,
                &shape,
                primitive.name,
                Some((&consumer.name, &consumer.axes)),
            ));
        }
        variants
    }
}

/// The stencil sketch of `stage`: computed in place (`host` none), or one
/// output row at a time inside the row loop of its elementwise consumer
/// `host` (name, its axis names in the stage's axis order).
fn stencil_variant(
    stage: &Stage,
    shape: &StencilShape,
    primitive: &'static str,
    host: Option<(&String, &Vec<String>)>,
) -> Variant {
    let name = &stage.name;
    let axis_name = |axis: &Var| axis.name().to_string();
    // The host's name of the stage's axis `axis`.
    let host_axis = |axis: &Var| match host {
        Some((_, axes)) => stage
            .op
            .axes
            .iter()
            .position(|a| a.id() == axis.id())
            .and_then(|p| axes.get(p).cloned()),
        None => Some(axis_name(axis)),
    };
    let host_stage = host.map_or(name.clone(), |(h, _)| h.clone());
    let mut steps = Vec::new();
    let mut sites = Vec::new();
    if let Some((consumer, _)) = host
        && let Some(rows) = shape.rows.as_ref().and_then(host_axis)
    {
        steps.push(SketchStep::Fixed(Step::ComputeAt {
            stage: name.clone(),
            target: consumer.clone(),
            iter: rows,
        }));
    }
    // Padding once per plane of the host, while the plane is in cache;
    // at the root when there is no plane loop.
    for operand in &shape.materialize {
        let placement = match shape.plane.as_ref().and_then(host_axis) {
            Some(plane) => Step::ComputeAt {
                stage: operand.clone(),
                target: host_stage.clone(),
                iter: plane,
            },
            None => Step::ComputeRoot {
                stage: operand.clone(),
            },
        };
        steps.push(SketchStep::Fixed(placement));
        sites.push(padding_site(operand));
    }
    // Every other loop outside the block `row window[0] window[1]`.
    let in_block =
        |a: &Var| a.id() == shape.row.id() || shape.window.iter().any(|w| w.id() == a.id());
    let reductions = stage
        .op
        .reduction()
        .map(|r| r.axes.as_slice())
        .unwrap_or(&[]);
    let mut order: Vec<String> = stage
        .op
        .axes
        .iter()
        .chain(reductions)
        .filter(|a| !in_block(a))
        .map(axis_name)
        .collect();
    order.push(axis_name(&shape.row));
    order.extend(shape.window.iter().map(axis_name));
    steps.push(SketchStep::Fixed(Step::Reorder {
        stage: name.clone(),
        order,
    }));
    steps.push(SketchStep::Fixed(Step::Tensorize {
        stage: name.clone(),
        iter: axis_name(&shape.row),
        kernel: primitive.to_string(),
    }));
    // In place, the stage's innermost loops are the block: parallel only.
    sites.push(match host {
        Some((consumer, _)) => site(consumer, true, true, false),
        None => site(name, true, false, false),
    });
    Variant {
        stage: name.clone(),
        kind: VariantKind::Tensorize {
            kernel: primitive,
            in_place: host.is_none(),
            transposed_accumulator: false,
            a_panel: false,
            reduction_outer: false,
            packing: None,
        },
        steps,
        sites,
    }
}
