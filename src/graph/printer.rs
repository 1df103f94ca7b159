//! `tessera model show`: a model as text — inputs, outputs, constants, and
//! the memory plan's arena, and per node its shapes, FLOPs and the tessera
//! operator or DAG it becomes.

use std::fmt::Write;

use super::fusion::{FUSION_RULES, fuse};
use super::ir::Graph;
use super::lower::{Lowered, lower_node};
use super::memory::MemoryPlan;

/// The shape of `name` as `f32[1,3,224,224]`.
fn typed_shape(graph: &Graph, name: &str) -> String {
    match graph.info(name) {
        Some(info) => format!(
            "{}[{}]",
            info.dtype,
            info.shape
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
        None => "?".to_string(),
    }
}

/// The readable description of `graph` (read from `source`).
pub fn describe(graph: &Graph, source: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "model:     {source} (graph '{}', opset {})",
        graph.name, graph.opset
    );
    for (label, names) in [("inputs:", &graph.inputs), ("outputs:", &graph.outputs)] {
        let list: Vec<String> = names
            .iter()
            .map(|n| format!("{n} {}", typed_shape(graph, n)))
            .collect();
        let _ = writeln!(out, "{label:<10} {}", list.join(", "));
    }
    let values: usize = graph.constants.values().map(|c| c.len()).sum();
    let bytes: usize = graph
        .constants
        .values()
        .map(|c| c.len() * c.dtype().size_bytes())
        .sum();
    let _ = writeln!(
        out,
        "constants: {} tensors, {values} values ({:.1} MB)",
        graph.constants.len(),
        bytes as f64 / 1e6
    );
    let mut rows = Vec::with_capacity(graph.nodes.len());
    let mut all_lowered = Vec::with_capacity(graph.nodes.len());
    let (mut total_flops, mut kernels, mut aliases, mut failed) = (0u64, 0usize, 0usize, 0usize);
    for (i, node) in graph.nodes.iter().enumerate() {
        let inputs: Vec<String> = node.inputs.iter().map(|n| typed_shape(graph, n)).collect();
        let output = node
            .outputs
            .first()
            .map_or_else(String::new, |o| typed_shape(graph, o));
        let lowered = lower_node(graph, node);
        let (flops, becomes) = match &lowered {
            Ok(Lowered::Alias) => {
                aliases += 1;
                (0, "alias (no kernel)".to_string())
            }
            Ok(Lowered::Kernel(k)) => {
                kernels += 1;
                let flops = k.dag.flop_count();
                let becomes = match &k.registry_op {
                    Some((op, shape)) => format!("{op} [{shape}]"),
                    None => format!("te DAG {}", k.dag.label()),
                };
                (flops, becomes)
            }
            Err(e) => {
                failed += 1;
                (0, format!("cannot lower: {e}"))
            }
        };
        total_flops += flops;
        if let Ok(lowered) = lowered {
            all_lowered.push(lowered);
        }
        rows.push(vec![
            i.to_string(),
            node.name.clone(),
            node.op.name().to_string(),
            format!("{} → {output}", inputs.join(" ")),
            format!("{:.3}", flops as f64 / 1e9),
            becomes,
        ]);
    }
    let _ = writeln!(
        out,
        "nodes:     {} ({kernels} kernels, {aliases} aliases{}), {:.3} GFLOP",
        graph.nodes.len(),
        if failed > 0 {
            format!(", {failed} that cannot be lowered")
        } else {
            String::new()
        },
        total_flops as f64 / 1e9
    );
    let memory = if failed > 0 {
        "not planned (some nodes cannot be lowered)".to_string()
    } else {
        match MemoryPlan::new(graph, &all_lowered, &[]) {
            Ok(plan) => plan.to_string(),
            Err(e) => format!("not planned ({e})"),
        }
    };
    let _ = writeln!(out, "memory:    {memory}\n");
    out.push_str(&table(
        &["#", "node", "op", "shapes", "GFLOP", "becomes"],
        &rows,
    ));
    out
}

/// The fusion rules in order, the kernels `graph` runs as after fusion
/// (each fused group with its members and the task it becomes), and the
/// memory plan of the fused graph.
pub fn describe_fusion(graph: &Graph) -> String {
    let mut out =
        String::from("fusion rules, asked in order for each node that could join a group:\n");
    for (i, rule) in FUSION_RULES.iter().enumerate() {
        let _ = writeln!(out, "  {}. {:<28} {}", i + 1, rule.name(), rule.summary());
    }
    let fused = match fuse(graph, &[]) {
        Ok(fused) => fused,
        Err(e) => {
            let _ = writeln!(out, "not fused: {e}");
            return out;
        }
    };
    let kernels = fused
        .lowered
        .iter()
        .filter(|l| matches!(l, Lowered::Kernel(_)))
        .count();
    let spliced = fused
        .groups
        .iter()
        .filter(|g| g.not_spliced.is_none())
        .count();
    let _ = writeln!(
        out,
        "kernels:   {kernels} after fusion ({} nodes; {spliced} fused groups)",
        graph.nodes.len()
    );
    let memory = match MemoryPlan::new(&fused.graph, &fused.lowered, &[]) {
        Ok(plan) => plan.to_string(),
        Err(e) => format!("not planned ({e})"),
    };
    let _ = writeln!(out, "memory:    {memory}\n");
    let mut rows = Vec::new();
    for group in &fused.groups {
        let task = fused
            .graph
            .nodes
            .iter()
            .zip(&fused.lowered)
            .find(|(n, _)| n.name == group.name)
            .and_then(|(_, l)| match l {
                Lowered::Kernel(k) => Some(k.dag.workload_key().to_string()),
                Lowered::Alias => None,
            })
            .unwrap_or_default();
        let task = match &group.not_spliced {
            Some(why) => format!("not spliced: {why}"),
            None => task,
        };
        rows.push(vec![group.name.clone(), group.members.join(", "), task]);
    }
    out.push_str(&table(&["group", "nodes", "task"], &rows));
    out
}

/// Rows under a header, columns padded to their widest cell.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, &w)| format!("{c}{}", " ".repeat(w.saturating_sub(c.chars().count()))))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}
