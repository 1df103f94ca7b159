//! The canonical text form of a DAG and the [`WorkloadKey`] derived from it.
//!
//! Canonical names: inputs `p0, p1, …` in argument order, compute stages
//! `s0, s1, …` in topological order, spatial indices `i0, i1, …` and reduction
//! axes `r0, r1, …` per stage. Constants carry their dtype. The text therefore
//! depends only on the computation, the shapes and the dtypes, never on the
//! names a user chose or on the process that built it.

use std::collections::HashMap;
use std::fmt::{self, Write};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::dag::ComputeDag;
use super::expr::{ExprKind, Var};
use super::ids::{TensorId, VarId};
use super::printer::{Naming, write_expr};
use super::tensor::{Tensor, TensorOp};

/// Version of the canonical text; part of every hash.
const CANONICAL_VERSION: &str = "tessera-dag v1";

struct CanonicalNames {
    tensors: HashMap<TensorId, String>,
    vars: HashMap<VarId, String>,
}

impl Naming for CanonicalNames {
    fn var(&self, v: &Var) -> String {
        self.vars
            .get(&v.id())
            .cloned()
            .unwrap_or_else(|| format!("?{}", v.name()))
    }
    fn tensor(&self, t: &Tensor) -> String {
        self.tensors
            .get(&t.id())
            .cloned()
            .unwrap_or_else(|| format!("?{}", t.name()))
    }
    fn typed_constants(&self) -> bool {
        true
    }
}

fn write_shape(out: &mut String, t: &Tensor) -> fmt::Result {
    let dims: Vec<String> = t.shape().iter().map(i64::to_string).collect();
    write!(out, "{}[{}]", t.dtype(), dims.join(", "))
}

impl ComputeDag {
    /// The canonical text form (see the module docs); the input of the hash.
    pub fn canonical_text(&self) -> String {
        let mut names = CanonicalNames {
            tensors: HashMap::new(),
            vars: HashMap::new(),
        };
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_canonical(&mut out, &mut names);
        out
    }

    fn write_canonical(&self, out: &mut String, names: &mut CanonicalNames) -> fmt::Result {
        writeln!(out, "{CANONICAL_VERSION}")?;
        let mut stage_count = 0;
        for (n, t) in self.tensors().iter().enumerate() {
            match t.op() {
                TensorOp::Placeholder => {
                    let name = format!("p{n}");
                    write!(out, "{name} = placeholder ")?;
                    write_shape(out, t)?;
                    names.tensors.insert(t.id(), name);
                }
                TensorOp::Compute(op) => {
                    let name = format!("s{stage_count}");
                    stage_count += 1;
                    names.vars.clear();
                    for (d, v) in op.axes.iter().enumerate() {
                        names.vars.insert(v.id(), format!("i{d}"));
                    }
                    if let ExprKind::Reduce(r) = op.body.kind() {
                        for (d, v) in r.axes.iter().enumerate() {
                            names.vars.insert(v.id(), format!("r{d}"));
                        }
                    }
                    write!(out, "{name} = compute ")?;
                    write_shape(out, t)?;
                    out.push_str(" = ");
                    write_expr(out, &op.body, names)?;
                    names.tensors.insert(t.id(), name);
                }
            }
            out.push('\n');
        }
        let outputs: Vec<String> = self.outputs().iter().map(|t| names.tensor(t)).collect();
        writeln!(out, "outputs {}", outputs.join(", "))
    }

    /// The key of this workload: a stable hash of the canonical text plus the label.
    pub fn workload_key(&self) -> WorkloadKey {
        let digest = Sha256::digest(self.canonical_text().as_bytes());
        let hash = digest.iter().map(|b| format!("{b:02x}")).collect();
        WorkloadKey {
            hash,
            readable: self.label().to_string(),
        }
    }
}

/// Identifies a workload: the same computation on the same shapes and dtypes.
///
/// Equality is on `hash` and `readable`; the hash alone decides identity of
/// the computation (the readable part is a label such as
/// `matmul[M=512,N=512,K=512,f32]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WorkloadKey {
    /// SHA-256 of the canonical text, 64 lowercase hex digits.
    pub hash: String,
    /// The readable form, e.g. `matmul[M=512,N=512,K=512,f32]`.
    pub readable: String,
}

impl WorkloadKey {
    /// The first 12 hex digits of the hash, for display.
    pub fn short_hash(&self) -> &str {
        &self.hash[..self.hash.len().min(12)]
    }
}

impl fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.readable, self.short_hash())
    }
}
