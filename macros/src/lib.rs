//! `op!`: tessera operators written close to the math.
//!
//! ```
//! tessera::op! {
//!     /// Dense layer with bias and ReLU.
//!     pub fn dense_relu(x: f32[M, K], w: f32[N, K], b: f32[N]) -> f32[M, N] {
//!         y[i, j] = sum(k) x[i, k] * w[j, k];
//!         out[i, j] = max(y[i, j] + b[j], 0.0)
//!     }
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! assert_eq!(dense_relu::PARAMS, &["M", "K", "N"]);
//! let op = dense_relu::Compiled::new(&[1, 2, 2])?; // M=1, K=2, N=2
//! let mut out = [0.0f32; 2];
//! op.call(&[1.0, 2.0], &[1.0, 1.0, -1.0, 0.0], &[0.5, 0.5], &mut out)?;
//! assert_eq!(out, [3.5, 0.0]);
//! # Ok(())
//! # }
//! ```
//!
//! # Grammar
//!
//! ```text
//! op        = { outer_attribute | defaults } [ visibility ] "fn" IDENT
//!             "(" [ input { "," input } [ "," ] ] ")" "->" type body ;
//! defaults  = "#" "[" "defaults" "(" IDENT "=" INTEGER { "," IDENT "=" INTEGER } ")" "]" ;
//! input     = IDENT ":" type ;
//! type      = dtype "[" [ dim { "," dim } [ "," ] ] "]" ;
//! dtype     = "f32" | "f64" | "i32" | "i64" ;
//! dim       = IDENT                      (* a shape parameter *)
//!           | INTEGER ;                  (* a fixed extent ≥ 1 *)
//! body      = "{" stmt { ";" stmt } [ ";" ] "}" ;
//! stmt      = IDENT "[" [ IDENT { "," IDENT } ] "]" "=" rhs ;
//! rhs       = reduction | expr ;
//! reduction = ( "sum" | "max" | "min" ) "(" axis { "," axis } ")" expr ;
//! axis      = IDENT [ "in" "0" ".." dim ] ;
//! expr      = expr binop expr | unary ;  (* precedence, loosest first:
//!                                           || ; && ; < <= > >= == != ; + - ; * / *)
//! unary     = ( "-" | "!" ) unary | cast ;
//! cast      = primary { "as" dtype } ;
//! primary   = FLOAT | INTEGER            (* optional suffix f32/f64/i32/i64 *)
//!           | IDENT                      (* index variable or shape parameter *)
//!           | IDENT "[" expr { "," expr } "]"        (* tensor read *)
//!           | IDENT "(" expr { "," expr } ")"        (* function call *)
//!           | "if" expr "{" expr "}" "else" ( "{" expr "}" | primary_if )
//!           | "(" expr ")" ;
//! ```
//!
//! Functions: `exp log sqrt tanh sigmoid erf` (floats), `abs`, `pow(x, y)`,
//! `max(a, b)`, `min(a, b)`, and `select(cond, a, b)` (the same as
//! `if cond { a } else { b }`; only the chosen branch is evaluated, so the
//! other may read out of bounds — this is how padding is written).
//!
//! # Rules
//!
//! - **Shape parameters** are the identifiers in the signature's dimensions,
//!   in order of first appearance (inputs left to right, then the return
//!   type). They may also be used in expressions as `i64` values.
//! - **Statements** define stages in order; each may read the inputs and the
//!   stages before it. The **last statement is the output**: its shape and
//!   dtype are the return type's, and it binds one index per dimension.
//! - **Index variables** of a statement are bound by its left-hand side
//!   (spatial) and by its reduction (`sum(k, l)`). A reduction is the whole
//!   right-hand side: its body extends to the end of the statement.
//!   `max(k) e` / `min(k) e` are reductions when an operand follows the
//!   parentheses; `max(a, b)` followed by an operator or the end is the
//!   elementwise function.
//! - **Extents.** A spatial index of an intermediate stage, and a reduction
//!   axis without a range, takes the extent of the first tensor dimension it
//!   indexes *directly* (`x[i, k]`: `k` gets `x`'s dimension 1). An axis used
//!   only inside index arithmetic (`x[i + k]`) needs an explicit range:
//!   `sum(k in 0..R)`, where `R` is a shape parameter or an integer. Every
//!   other read is bounds-checked when the DAG is built.
//! - **Dtypes.** Tensors have their declared dtype, stages the dtype of their
//!   expression (the output its declared one). Index variables and shape
//!   parameters are `i64`; every index must be `i64`. Literals adapt to the
//!   other operand (`x + 1` is `f32` for an `f32` `x`); alone a float literal
//!   is `f32` and an integer one `i64`. Any other mix is an error: convert
//!   with `as`.
//!
//! - **Defaults.** `#[defaults(M = 64, N = 256)]` gives shape parameters
//!   the values `--shape` falls back to; a parameter without one must be
//!   given. Each default must name a parameter and be at least 1.
//!
//! Every mistake — an unknown tensor, a wrong number of indices, an unbound
//! index variable, a dtype mismatch, a reduction axis not used in its body —
//! is a compile error at the offending tokens.
//!
//! # Expansion
//!
//! `pub fn dense_relu(…)` becomes `pub mod dense_relu` (the doc comment goes
//! on the module) with:
//!
//! - `NAME`, `DOC`, `PARAMS` (shape parameter names), `INPUTS`, `OUTPUT`;
//! - `fn dag(shape: &[i64]) -> Result<ComputeDag, tessera::ops::OpError>`:
//!   the DAG built with the te builders for the parameter values in `PARAMS`
//!   order, labelled `dense_relu[M=…,K=…,N=…,f32]` like the built-in ops
//!   (the same signature as a registry op's builder, for registration);
//! - `fn call(kernel: &Kernel, x: &[f32], w: &[f32], b: &[f32], out: &mut [f32])`:
//!   runs any kernel compiled from that DAG (default, tuned or deployed) on
//!   row-major slices, checking every length and dtype against the kernel's
//!   parameters (errors: the module's `Error`);
//! - `struct Compiled` (`Compiled::new(shape)` compiles the default
//!   schedule; `.call(&x, &w, &b, &mut out)`; `.dag()`, `.kernel()`,
//!   `.shape()`).
//!
//! - registration: `DESCRIPTION` (the doc's first line and the signature),
//!   `PARAM_SPECS` (with the defaults), `SPEC: tessera::ops::OpSpec`, and an
//!   `inventory::submit!` of `SPEC`. The op is in `tessera::ops::registry()`
//!   from the start of the program, so a binary whose `main` calls
//!   `tessera::cli::run()` lists it in `ops` and can `tune`, `show`, `bench`
//!   and `deploy` it by name (its measurement workers are the same binary).
//!   Names are global: a second op of the same name (built-in or not) makes
//!   looking that name up an error that names both definitions.
//!
//! Kernels take aligned `NdBuffer`s, so `call` copies each input in and the
//! output out once.

mod check;
mod expand;
mod parse;
mod registration;

use proc_macro::TokenStream;

/// Defines a tessera operator; see the [crate docs](crate) for the syntax,
/// the rules and the expansion.
#[proc_macro]
pub fn op(input: TokenStream) -> TokenStream {
    let def = match syn::parse::<parse::OpDef>(input) {
        Ok(def) => def,
        Err(e) => return e.to_compile_error().into(),
    };
    match check::check(&def) {
        Ok(checked) => match expand::expand(&def, &checked) {
            Ok(tokens) => tokens.into(),
            Err(e) => e.to_compile_error().into(),
        },
        Err(e) => e.to_compile_error().into(),
    }
}
