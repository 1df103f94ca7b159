//! Readable text form of the loop IR, in the spirit of TVM's TIR script.

use std::fmt::{self, Write};

use super::ir::{Buffer, ForKind, MemScope, PrimFunc, Stmt};

fn buffer_type(b: &Buffer) -> String {
    let dims: Vec<String> = b.shape.iter().map(i64::to_string).collect();
    format!("{}[{}]", b.dtype, dims.join(", "))
}

fn write_stmt(out: &mut String, f: &PrimFunc, s: &Stmt, depth: usize) -> fmt::Result {
    let pad = "  ".repeat(depth);
    match s {
        Stmt::For {
            var,
            extent,
            kind,
            body,
        } => {
            let annotation = match kind {
                ForKind::Serial => String::new(),
                other => format!(" {}", other.name()),
            };
            writeln!(out, "{pad}for {} in 0..{extent}{annotation} {{", var.name())?;
            write_stmt(out, f, body, depth + 1)?;
            writeln!(out, "{pad}}}")
        }
        Stmt::Seq(items) => {
            for item in items {
                write_stmt(out, f, item, depth)?;
            }
            Ok(())
        }
        Stmt::Store {
            buffer,
            indices,
            value,
        } => {
            let idx: Vec<String> = indices.iter().map(|i| i.to_string()).collect();
            writeln!(
                out,
                "{pad}{}[{}] = {value}",
                f.buffers[*buffer].name,
                idx.join(", ")
            )
        }
        Stmt::IfThenElse {
            cond,
            then,
            otherwise,
        } => {
            writeln!(out, "{pad}if {cond} {{")?;
            write_stmt(out, f, then, depth + 1)?;
            if let Some(o) = otherwise {
                writeln!(out, "{pad}}} else {{")?;
                write_stmt(out, f, o, depth + 1)?;
            }
            writeln!(out, "{pad}}}")
        }
        Stmt::Allocate { buffer, body } => {
            writeln!(out, "{pad}alloc {}", f.buffers[*buffer])?;
            write_stmt(out, f, body, depth)
        }
        Stmt::Let { var, value, body } => {
            writeln!(out, "{pad}let {} = {value}", var.name())?;
            write_stmt(out, f, body, depth)
        }
        Stmt::RowMathCall(call) => {
            let name = &f.buffers[call.buffer].name;
            writeln!(
                out,
                "{pad}{name}[0..{n}] = {}({name}[0..{n}])  // row primitive {}",
                call.function.name(),
                call.primitive(),
                n = call.count
            )
        }
        Stmt::PackCall(call) => {
            let [rows, cols] = &call.counts;
            writeln!(
                out,
                "{pad}{} = {}  // pack {} {}x{} rows={rows} cols={cols}",
                operand(f, &call.dst),
                operand(f, &call.src),
                call.routine(),
                call.extents[0],
                call.extents[1]
            )
        }
        Stmt::MicroKernelCall(call) => {
            let operand = |o: &super::ir::MicroKernelOperand| operand(f, o);
            let [m, n, kc] = &call.counts;
            let (assign, when) = assignment(&call.accumulate);
            let product = with_epilogue(
                f,
                format!("{} @ {}", operand(&call.a), operand(&call.b)),
                call.epilogue.as_ref(),
            );
            writeln!(
                out,
                "{pad}{} {assign} {product}  // micro-kernel {} {}x{}x{} m={m} n={n} kc={kc}{when}",
                operand(&call.c),
                call.kernel,
                call.m,
                call.n,
                call.kc
            )
        }
        Stmt::StencilCall(call) => {
            let [n, r, s] = &call.counts;
            let (assign, when) = assignment(&call.accumulate);
            let sum = with_epilogue(
                f,
                format!(
                    "sum_rs {} * {}",
                    stencil_operand(f, &call.weight),
                    stencil_operand(f, &call.input)
                ),
                call.epilogue.as_ref(),
            );
            writeln!(
                out,
                "{pad}{} {assign} {sum}  // stencil {} {}x{}x{} n={n} r={r} s={s} rows={}{when}",
                stencil_operand(f, &call.out),
                call.primitive(),
                call.extents[0],
                call.extents[1],
                call.extents[2],
                call.rows
            )
        }
    }
}

/// `name: f32[64, 16] local`.
impl fmt::Display for Buffer {
    fn fmt(&self, fmt: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scope = match self.scope {
            MemScope::Global => "global",
            MemScope::Local => "local",
        };
        write!(fmt, "{}: {} {scope}", self.name, buffer_type(self))
    }
}

impl fmt::Display for PrimFunc {
    fn fmt(&self, fmt: &mut fmt::Formatter<'_>) -> fmt::Result {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|&p| {
                format!(
                    "{}: {}",
                    self.buffers[p].name,
                    buffer_type(&self.buffers[p])
                )
            })
            .collect();
        let mut out = String::new();
        writeln!(out, "func {}({}) {{", self.name, params.join(", "))?;
        write_stmt(&mut out, self, &self.body, 1)?;
        out.push_str("}\n");
        fmt.write_str(&out)
    }
}

/// An operand as `buffer[offset + r*row_stride + c*col_stride]`.
/// A call's assignment by its `accumulate`: `=` from zero, `+=` onto the
/// output, `(+)=` decided per call (with the expression that decides).
fn assignment(accumulate: &crate::te::Expr) -> (&'static str, String) {
    match accumulate.as_int() {
        Some(0) => ("=", String::new()),
        Some(_) => ("+=", String::new()),
        None => ("(+)=", format!(" accumulate={accumulate}")),
    }
}

fn stencil_operand(f: &PrimFunc, o: &super::ir::StencilOperand) -> String {
    let [j, r, s, y] = o.strides;
    format!(
        "{}[{} + j*{j} + r*{r} + s*{s} + y*{y}]",
        f.buffers[o.buffer].name, o.offset
    )
}

/// `value` as a call's epilogue transforms it: `min(max((value + a) + b, lo), hi)`.
fn with_epilogue(
    f: &PrimFunc,
    value: String,
    epilogue: Option<&super::ir::KernelEpilogue>,
) -> String {
    let Some(epilogue) = epilogue else {
        return value;
    };
    let mut value = value;
    for addend in &epilogue.addends {
        value = format!("({value} + {})", operand(f, addend));
    }
    if let Some(lower) = epilogue.lower {
        value = format!("max({value}, {lower:?})");
    }
    if let Some(upper) = epilogue.upper {
        value = format!("min({value}, {upper:?})");
    }
    value
}

fn operand(f: &PrimFunc, o: &super::ir::MicroKernelOperand) -> String {
    format!(
        "{}[{} + r*{} + c*{}]",
        f.buffers[o.buffer].name, o.offset, o.row_stride, o.col_stride
    )
}
