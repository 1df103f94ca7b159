//! Steps recorded on one DAG, rewritten for another DAG of the same
//! workload (the same canonical form, so the same key) whose tensors and
//! axes have other names — a user's own definition of a registered
//! operator. Tensors and axes correspond by position; derived names
//! (`C.local`, `k.0`, `i0@i1`) keep their suffixes.

use std::collections::HashMap;

use serde_json::Value;

use crate::schedule::Step;
use crate::te::{ComputeDag, Tensor};

/// Names of one DAG mapped to another's.
struct NameMap {
    stages: HashMap<String, String>,
    /// Per stage (of the source DAG): its axis names mapped.
    axes: HashMap<String, HashMap<String, String>>,
}

fn axis_names(t: &Tensor) -> Vec<String> {
    let Some(op) = t.compute_op() else {
        return Vec::new();
    };
    let mut names: Vec<String> = op.axes.iter().map(|a| a.name().to_string()).collect();
    if let Some(r) = op.reduction() {
        names.extend(r.axes.iter().map(|a| a.name().to_string()));
    }
    names
}

impl NameMap {
    fn new(from: &ComputeDag, to: &ComputeDag) -> Option<NameMap> {
        if from.tensors().len() != to.tensors().len() {
            return None;
        }
        let mut stages = HashMap::new();
        let mut axes = HashMap::new();
        for (a, b) in from.tensors().iter().zip(to.tensors()) {
            stages.insert(a.name().to_string(), b.name().to_string());
            let (xs, ys) = (axis_names(a), axis_names(b));
            if xs.len() != ys.len() {
                return None;
            }
            axes.insert(a.name().to_string(), xs.into_iter().zip(ys).collect());
        }
        Some(NameMap { stages, axes })
    }

    /// `X` or `X.local`, `X.rf`… with `X` renamed.
    fn stage(&self, name: &str) -> String {
        let (base, rest) = name
            .split_once('.')
            .map_or((name, None), |(b, r)| (b, Some(r)));
        let base = self.stages.get(base).map_or(base, String::as_str);
        match rest {
            Some(rest) => format!("{base}.{rest}"),
            None => base.to_string(),
        }
    }

    /// An iterator name of `stage` (of the source DAG): each fused part's
    /// leading axis name renamed, split suffixes kept.
    fn iter(&self, stage: &str, name: &str) -> String {
        let base = stage.split('.').next().unwrap_or(stage);
        let Some(axes) = self.axes.get(base) else {
            return name.to_string();
        };
        name.split('@')
            .map(|part| {
                let (axis, rest) = part
                    .split_once('.')
                    .map_or((part, None), |(a, r)| (a, Some(r)));
                let axis = axes.get(axis).map_or(axis, String::as_str);
                match rest {
                    Some(rest) => format!("{axis}.{rest}"),
                    None => axis.to_string(),
                }
            })
            .collect::<Vec<_>>()
            .join("@")
    }
}

/// `steps` (recorded on `from`) with `to`'s names, or `None` when the two
/// DAGs do not line up tensor by tensor and axis by axis.
pub fn translate_steps(from: &ComputeDag, to: &ComputeDag, steps: &[Step]) -> Option<Vec<Step>> {
    let map = NameMap::new(from, to)?;
    steps
        .iter()
        .map(|step| {
            let mut v = serde_json::to_value(step).ok()?;
            let obj = v.as_object_mut()?;
            let stage = obj.get("stage")?.as_str()?.to_string();
            // The loops a step names belong to its target when it has one.
            let owner = obj
                .get("target")
                .and_then(Value::as_str)
                .unwrap_or(&stage)
                .to_string();
            for (key, value) in obj.iter_mut() {
                match (key.as_str(), value) {
                    ("stage" | "target", Value::String(s)) => *s = map.stage(s),
                    ("readers", Value::Array(list)) => {
                        for s in list.iter_mut() {
                            if let Value::String(s) = s {
                                *s = map.stage(s);
                            }
                        }
                    }
                    ("iter", Value::String(s)) => *s = map.iter(&owner, s),
                    ("iters" | "order", Value::Array(list)) => {
                        for s in list.iter_mut() {
                            if let Value::String(s) = s {
                                *s = map.iter(&owner, s);
                            }
                        }
                    }
                    _ => {}
                }
            }
            serde_json::from_value(v).ok()
        })
        .collect()
}
