//! Expansion: a checked operator into a module of plain Rust that builds the
//! ComputeDag with the te builders (absolute `::tessera::…` paths only) and
//! calls compiled kernels with typed slices.

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};
use syn::{Expr as SynExpr, ExprLit, Lit, Meta};

use crate::check::{Checked, Extent, Intrinsic, TExpr, TKind, TensorRef, VarRef};
use crate::parse::{BinOp, DType, OpDef, ReduceOp};
use crate::registration::{description, is_defaults, param_infos};

fn dtype_tokens(d: DType) -> TokenStream {
    match d {
        DType::F32 => quote!(::tessera::te::DType::F32),
        DType::F64 => quote!(::tessera::te::DType::F64),
        DType::I32 => quote!(::tessera::te::DType::I32),
        DType::I64 => quote!(::tessera::te::DType::I64),
        DType::Bool => quote!(::tessera::te::DType::Bool),
    }
}

fn rust_type(d: DType) -> TokenStream {
    match d {
        DType::F32 => quote!(f32),
        DType::F64 => quote!(f64),
        DType::I32 => quote!(i32),
        DType::I64 => quote!(i64),
        DType::Bool => quote!(bool),
    }
}

/// An integer as tokens, negative values as `-(n)`.
fn int_tokens(v: i64) -> TokenStream {
    let lit = Literal::u64_unsuffixed(v.unsigned_abs());
    if v < 0 {
        quote!((-(#lit)))
    } else {
        quote!(#lit)
    }
}

fn float_tokens(v: f64) -> TokenStream {
    let lit = Literal::f64_suffixed(v.abs());
    if v.is_sign_negative() {
        quote!((-(#lit)))
    } else {
        quote!(#lit)
    }
}

fn extent_tokens(e: Extent) -> TokenStream {
    match e {
        Extent::Param(p) => {
            let p = format_ident!("__p{}", p);
            quote!(#p)
        }
        Extent::Lit(v) => {
            let v = int_tokens(v);
            quote!((#v as i64))
        }
    }
}

fn tensor_ident(t: TensorRef) -> proc_macro2::Ident {
    match t {
        TensorRef::Input(n) => format_ident!("__t{}", n),
        TensorRef::Stage(n) => format_ident!("__s{}", n),
    }
}

fn emit(e: &TExpr) -> TokenStream {
    let dtype = e.dtype();
    match &e.kind {
        TKind::Float(v) => {
            let d = dtype_tokens(dtype);
            let v = float_tokens(*v);
            quote!(::tessera::te::Expr::constant(#d, #v))
        }
        TKind::Int(v) => {
            let n = int_tokens(*v);
            match dtype {
                DType::I64 => quote!(::tessera::te::Expr::i64(#n)),
                DType::I32 => quote!(::tessera::te::Expr::i32(#n)),
                d => {
                    let d = dtype_tokens(d);
                    let f = float_tokens(*v as f64);
                    quote!(::tessera::te::Expr::constant(#d, #f))
                }
            }
        }
        TKind::Var(VarRef::Spatial(d)) => quote!(__ix[#d].clone()),
        TKind::Var(VarRef::Reduce(r)) => {
            let r = format_ident!("__r{}", r);
            quote!(#r.clone())
        }
        TKind::Param(p) => {
            let p = format_ident!("__p{}", p);
            quote!(::tessera::te::Expr::i64(#p))
        }
        TKind::Read(t, idx) => {
            let t = tensor_ident(*t);
            let n = idx.len();
            let idx = idx.iter().map(emit);
            quote!({
                let __idx: [::tessera::te::Expr; #n] = [#(#idx),*];
                #t.at(__idx)
            })
        }
        TKind::Neg(a) => {
            let a = emit(a);
            quote!((-(#a)))
        }
        TKind::Not(a) => {
            let a = emit(a);
            quote!((!(#a)))
        }
        TKind::Binary(op, a, b) => {
            let (a, b) = (emit(a), emit(b));
            match op {
                BinOp::Add => quote!(((#a) + (#b))),
                BinOp::Sub => quote!(((#a) - (#b))),
                BinOp::Mul => quote!(((#a) * (#b))),
                BinOp::Div => quote!(((#a) / (#b))),
                BinOp::Lt => quote!((#a).lt(#b)),
                BinOp::Le => quote!((#a).le(#b)),
                BinOp::Gt => quote!((#a).gt(#b)),
                BinOp::Ge => quote!((#a).ge(#b)),
                BinOp::Eq => quote!((#a).equal(#b)),
                BinOp::Ne => quote!((#a).not_equal(#b)),
                BinOp::And => quote!((#a).and(#b)),
                BinOp::Or => quote!((#a).or(#b)),
            }
        }
        TKind::Select(c, a, b) => {
            let (c, a, b) = (emit(c), emit(a), emit(b));
            quote!(::tessera::te::select(#c, #a, #b))
        }
        TKind::Call(f, args) => {
            let args: Vec<TokenStream> = args.iter().map(emit).collect();
            let f = match f {
                Intrinsic::Exp => quote!(exp),
                Intrinsic::Log => quote!(log),
                Intrinsic::Sqrt => quote!(sqrt),
                Intrinsic::Tanh => quote!(tanh),
                Intrinsic::Sigmoid => quote!(sigmoid),
                Intrinsic::Erf => quote!(erf),
                Intrinsic::Abs => quote!(abs),
                Intrinsic::Pow => quote!(pow),
                Intrinsic::Max => quote!(max),
                Intrinsic::Min => quote!(min),
            };
            quote!(::tessera::te::#f(#(#args),*))
        }
        TKind::Cast(a, d) => {
            let a = emit(a);
            let d = dtype_tokens(*d);
            quote!(::tessera::te::cast(#d, #a))
        }
    }
}

/// The doc comment's text, one line per `///` line.
fn doc_text(def: &OpDef) -> String {
    let lines: Vec<String> = def
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                SynExpr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').unwrap_or(&line).to_string())
        .collect();
    lines.join("\n").trim().to_string()
}

fn dag_fn(def: &OpDef, c: &Checked) -> TokenStream {
    let nparams = c.params.len();
    let params = (0..nparams).map(|p| {
        let id = format_ident!("__p{}", p);
        quote!(let #id: i64 = shape[#p];)
    });
    let inputs = c.inputs.iter().enumerate().map(|(n, t)| {
        let id = tensor_ident(TensorRef::Input(n));
        let name = t.name.to_string();
        let dims = t.shape.iter().map(|e| extent_tokens(*e));
        let d = dtype_tokens(t.dtype);
        quote!(let #id = ::tessera::te::placeholder(#name, &[#(#dims),*], #d);)
    });
    let stages = c.stages.iter().enumerate().map(|(n, s)| {
        let id = tensor_ident(TensorRef::Stage(n));
        let name = s.name.to_string();
        let dims = s.shape.iter().map(|e| extent_tokens(*e));
        let body = emit(&s.body);
        match &s.reduce {
            None => quote! {
                let #id = ::tessera::te::compute(#name, &[#(#dims),*], |__ix: &[::tessera::te::Expr]| #body);
            },
            Some((op, axes)) => {
                let axis_ids: Vec<_> = (0..axes.len()).map(|r| format_ident!("__r{}", r)).collect();
                let axis_defs = axes.iter().zip(&axis_ids).map(|((name, extent), id)| {
                    let name = name.to_string();
                    let extent = extent_tokens(*extent);
                    quote!(let #id = ::tessera::te::reduce_axis(#extent, #name);)
                });
                let f = match op {
                    ReduceOp::Sum => quote!(sum),
                    ReduceOp::Max => quote!(reduce_max),
                    ReduceOp::Min => quote!(reduce_min),
                };
                quote! {
                    let #id = {
                        #(#axis_defs)*
                        ::tessera::te::compute(#name, &[#(#dims),*], |__ix: &[::tessera::te::Expr]| {
                            ::tessera::te::#f(#body, [#(&#axis_ids),*])
                        })
                    };
                }
            }
        }
    });
    let input_ids = (0..c.inputs.len()).map(|n| tensor_ident(TensorRef::Input(n)));
    let output_id = tensor_ident(TensorRef::Stage(c.stages.len() - 1));
    let out_dtype = def.ret.dtype.name();
    quote! {
        /// Builds the operator's checked DAG for the shape parameter values
        /// `shape`, given in [`PARAMS`] order. The DAG is labelled
        /// `name[P=V,…,dtype]`, like the built-in ops.
        ///
        /// # Errors
        /// [`OpError::InvalidShape`](::tessera::ops::OpError::InvalidShape)
        /// when `shape` does not hold one value per parameter, and
        /// [`OpError::Dag`](::tessera::ops::OpError::Dag) when the tensors do
        /// not form a valid DAG at this shape (an extent below 1, a read out of
        /// bounds, a tensor too large).
        pub fn dag(shape: &[i64]) -> ::std::result::Result<::tessera::te::ComputeDag, ::tessera::ops::OpError> {
            if shape.len() != PARAMS.len() {
                return ::std::result::Result::Err(::tessera::ops::OpError::InvalidShape {
                    op: ::std::string::String::from(NAME),
                    reason: ::std::format!(
                        "takes {} shape parameter(s) ({}), got {} value(s)",
                        PARAMS.len(),
                        PARAMS.join(", "),
                        shape.len()
                    ),
                });
            }
            #(#params)*
            #(#inputs)*
            #(#stages)*
            let __pairs: ::std::vec::Vec<::std::string::String> = PARAMS
                .iter()
                .zip(shape)
                .map(|(name, value)| ::std::format!("{name}={value}"))
                .collect();
            let __label = if __pairs.is_empty() {
                ::std::format!("{}[{}]", NAME, #out_dtype)
            } else {
                ::std::format!("{}[{},{}]", NAME, __pairs.join(","), #out_dtype)
            };
            ::tessera::te::ComputeDag::new(&[#(#input_ids),*], &[#output_id])
                .map(|dag| dag.with_label(__label))
                .map_err(|source| ::tessera::ops::OpError::Dag {
                    op: ::std::string::String::from(NAME),
                    source,
                })
        }
    }
}

fn runtime_items(def: &OpDef, c: &Checked) -> TokenStream {
    let out_stage = &c.stages[c.stages.len() - 1];
    let out_name = &out_stage.name;
    let out_str = out_name.to_string();
    let out_ty = rust_type(def.ret.dtype);
    let arg_names: Vec<_> = c.inputs.iter().map(|t| &t.name).collect();
    let arg_strs: Vec<String> = arg_names.iter().map(|n| n.to_string()).collect();
    let arg_tys: Vec<_> = c.inputs.iter().map(|t| rust_type(t.dtype)).collect();
    let ninputs = c.inputs.len();
    let indices: Vec<usize> = (0..ninputs).collect();
    let buf_ids: Vec<_> = (0..ninputs).map(|n| format_ident!("__b{}", n)).collect();
    quote! {
        /// Why the operator could not be compiled or called.
        #[derive(Debug)]
        pub enum Error {
            /// The DAG could not be built for the shape.
            Op(::tessera::ops::OpError),
            /// The default schedule could not be lowered.
            Lower(::tessera::tir::LowerError),
            /// The loop program could not be compiled.
            Codegen(::tessera::codegen::CodegenError),
            /// The kernel rejected its buffers.
            Kernel(::tessera::codegen::KernelError),
            /// A slice whose length does not match its tensor's shape.
            Length {
                /// The argument's name.
                arg: &'static str,
                /// The tensor's shape.
                shape: ::std::vec::Vec<usize>,
                /// Elements the shape holds.
                expected: usize,
                /// The slice's length.
                got: usize,
            },
            /// A kernel whose parameters do not fit this operator's signature.
            Signature(::std::string::String),
        }

        impl ::std::fmt::Display for Error {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    Error::Op(e) => ::std::write!(f, "{e}"),
                    Error::Lower(e) => ::std::write!(f, "{}: {e}", NAME),
                    Error::Codegen(e) => ::std::write!(f, "{}: {e}", NAME),
                    Error::Kernel(e) => ::std::write!(f, "{}: {e}", NAME),
                    Error::Length { arg, shape, expected, got } => ::std::write!(
                        f,
                        "{}: argument '{arg}' has shape {shape:?} ({expected} elements), but the slice has {got}",
                        NAME
                    ),
                    Error::Signature(reason) => ::std::write!(f, "{}: {reason}", NAME),
                }
            }
        }

        impl ::std::error::Error for Error {
            fn source(&self) -> ::std::option::Option<&(dyn ::std::error::Error + 'static)> {
                match self {
                    Error::Op(e) => ::std::option::Option::Some(e),
                    Error::Lower(e) => ::std::option::Option::Some(e),
                    Error::Codegen(e) => ::std::option::Option::Some(e),
                    Error::Kernel(e) => ::std::option::Option::Some(e),
                    _ => ::std::option::Option::None,
                }
            }
        }

        impl ::std::convert::From<::tessera::ops::OpError> for Error {
            fn from(e: ::tessera::ops::OpError) -> Error {
                Error::Op(e)
            }
        }

        impl ::std::convert::From<::tessera::tir::LowerError> for Error {
            fn from(e: ::tessera::tir::LowerError) -> Error {
                Error::Lower(e)
            }
        }

        impl ::std::convert::From<::tessera::codegen::CodegenError> for Error {
            fn from(e: ::tessera::codegen::CodegenError) -> Error {
                Error::Codegen(e)
            }
        }

        impl ::std::convert::From<::tessera::codegen::KernelError> for Error {
            fn from(e: ::tessera::codegen::KernelError) -> Error {
                Error::Kernel(e)
            }
        }

        /// Element types that cross into kernel buffers.
        trait Element: ::std::marker::Copy {
            const DTYPE: ::tessera::te::DType;
            const SIZE: usize;
            fn put(self, out: &mut [u8]);
            fn get(bytes: &[u8]) -> Self;
        }

        macro_rules! __element {
            ($t:ty, $d:ident, $n:literal) => {
                impl Element for $t {
                    const DTYPE: ::tessera::te::DType = ::tessera::te::DType::$d;
                    const SIZE: usize = $n;
                    fn put(self, out: &mut [u8]) {
                        out.copy_from_slice(&self.to_ne_bytes());
                    }
                    fn get(bytes: &[u8]) -> Self {
                        let mut raw = [0u8; $n];
                        raw.copy_from_slice(bytes);
                        <$t>::from_ne_bytes(raw)
                    }
                }
            };
        }
        __element!(f32, F32, 4);
        __element!(f64, F64, 8);
        __element!(i32, I32, 4);
        __element!(i64, I64, 8);

        /// A zeroed buffer for parameter `index` after checking its dtype and the slice length.
        fn __buffer<T: Element>(
            kernel: &::tessera::codegen::Kernel,
            index: usize,
            arg: &'static str,
            len: usize,
        ) -> ::std::result::Result<::tessera::runtime::NdBuffer, Error> {
            let param = &kernel.params()[index];
            if param.dtype != T::DTYPE {
                return ::std::result::Result::Err(Error::Signature(::std::format!(
                    "kernel parameter {index} ('{}') is {}, but '{arg}' is {}",
                    param.name, param.dtype, T::DTYPE
                )));
            }
            let expected: usize = param.shape.iter().product();
            if expected != len {
                return ::std::result::Result::Err(Error::Length {
                    arg,
                    shape: param.shape.clone(),
                    expected,
                    got: len,
                });
            }
            ::tessera::runtime::NdBuffer::zeros(&param.shape, param.dtype)
                .map_err(|e| Error::Kernel(::tessera::codegen::KernelError::Buffer(e)))
        }

        fn __fill<T: Element>(buffer: &mut ::tessera::runtime::NdBuffer, data: &[T]) {
            for (chunk, value) in buffer.as_bytes_mut().chunks_exact_mut(T::SIZE).zip(data) {
                value.put(chunk);
            }
        }

        fn __drain<T: Element>(buffer: &::tessera::runtime::NdBuffer, data: &mut [T]) {
            for (value, chunk) in data.iter_mut().zip(buffer.as_bytes().chunks_exact(T::SIZE)) {
                *value = T::get(chunk);
            }
        }

        /// Runs `kernel` (compiled from this operator's DAG, by [`Compiled`],
        /// by the tuner or loaded from a deployed schedule) on row-major
        /// slices. Every slice's length and dtype is checked against the
        /// kernel's parameters first; inputs are copied into aligned kernel
        /// buffers and the output is copied back into `out`.
        ///
        /// # Errors
        /// [`Error::Length`] for a slice of the wrong length,
        /// [`Error::Signature`] for a kernel that does not take this
        /// operator's arguments.
        pub fn call(
            kernel: &::tessera::codegen::Kernel,
            #(#arg_names: &[#arg_tys],)*
            #out_name: &mut [#out_ty],
        ) -> ::std::result::Result<(), Error> {
            if kernel.params().len() != #ninputs + 1 || kernel.num_inputs() != #ninputs {
                return ::std::result::Result::Err(Error::Signature(::std::format!(
                    "the kernel takes {} inputs and {} outputs, but this operator has {} inputs and 1 output",
                    kernel.num_inputs(),
                    kernel.params().len() - kernel.num_inputs(),
                    #ninputs
                )));
            }
            #(
                let mut #buf_ids = self::__buffer::<#arg_tys>(kernel, #indices, #arg_strs, #arg_names.len())?;
                self::__fill(&mut #buf_ids, #arg_names);
            )*
            let mut __out = self::__buffer::<#out_ty>(kernel, #ninputs, #out_str, #out_name.len())?;
            kernel.run(&mut [#(&mut #buf_ids,)* &mut __out])?;
            self::__drain(&__out, #out_name);
            ::std::result::Result::Ok(())
        }

        /// The operator compiled for one shape with the default (untuned)
        /// schedule.
        pub struct Compiled {
            shape: ::std::vec::Vec<i64>,
            dag: ::tessera::te::ComputeDag,
            kernel: ::tessera::codegen::Kernel,
        }

        impl Compiled {
            /// Builds the DAG for `shape` (values in [`PARAMS`] order), lowers
            /// its default schedule and JIT-compiles it.
            ///
            /// # Errors
            /// Any error of [`dag`], lowering or code generation.
            pub fn new(shape: &[i64]) -> ::std::result::Result<Compiled, Error> {
                let dag = self::dag(shape)?;
                let func = ::tessera::tir::lower(&::tessera::schedule::State::new(&dag))?;
                let kernel = ::tessera::codegen::compile(
                    &func,
                    &::tessera::codegen::CodegenOptions::default(),
                )?;
                ::std::result::Result::Ok(Compiled {
                    shape: shape.to_vec(),
                    dag,
                    kernel,
                })
            }

            /// Runs the kernel; see [`call`].
            ///
            /// # Errors
            /// [`Error::Length`] for a slice that does not fit the shape.
            pub fn call(
                &self,
                #(#arg_names: &[#arg_tys],)*
                #out_name: &mut [#out_ty],
            ) -> ::std::result::Result<(), Error> {
                self::call(&self.kernel, #(#arg_names,)* #out_name)
            }

            /// The shape parameter values, in [`PARAMS`] order.
            pub fn shape(&self) -> &[i64] {
                &self.shape
            }

            /// The DAG the kernel computes.
            pub fn dag(&self) -> &::tessera::te::ComputeDag {
                &self.dag
            }

            /// The compiled kernel.
            pub fn kernel(&self) -> &::tessera::codegen::Kernel {
                &self.kernel
            }
        }
    }
}

/// `PARAM_SPECS`, `SPEC` and the `inventory` submission that puts the op in
/// the registry.
fn registration_items(def: &OpDef, c: &Checked) -> syn::Result<TokenStream> {
    let infos = param_infos(def, c)?;
    let specs = infos.iter().map(|p| {
        let name = &p.name;
        let default = match p.default {
            Some(v) => {
                let v = int_tokens(v);
                quote!(::std::option::Option::Some(#v))
            }
            None => quote!(::std::option::Option::None),
        };
        let min = int_tokens(p.min);
        let help = &p.help;
        quote!(::tessera::ops::ParamSpec { name: #name, default: #default, min: #min, help: #help })
    });
    let description = description(&doc_text(def), c);
    Ok(quote! {
        /// One line for `tessera ops`: the doc comment's first line and the signature.
        pub const DESCRIPTION: &str = #description;

        /// The shape parameters as the registry sees them: `PARAMS` with
        /// their `#[defaults]` (`None`: required) and smallest values.
        pub const PARAM_SPECS: &[::tessera::ops::ParamSpec] = &[#(#specs),*];

        fn __build(
            shape: &::tessera::ops::ShapeParams,
        ) -> ::std::result::Result<::tessera::te::ComputeDag, ::tessera::ops::OpError> {
            let values: ::std::vec::Vec<i64> = shape.values().iter().map(|(_, v)| *v).collect();
            self::dag(&values)
        }

        /// The operator's registry entry; it is registered at link time, so
        /// `tessera::ops::find(NAME)` and every CLI command of a binary that
        /// calls `tessera::cli::run()` know it.
        pub const SPEC: ::tessera::ops::OpSpec = ::tessera::ops::OpSpec::new(
            NAME,
            DESCRIPTION,
            PARAM_SPECS,
            __build,
            ::tessera::ops::Origin::Registered(::std::concat!(
                ::std::module_path!(), " (", ::std::file!(), ":", ::std::line!(), ")"
            )),
        );

        ::tessera::inventory::submit! { SPEC }
    })
}

/// The module an `op!` invocation expands to.
pub fn expand(def: &OpDef, c: &Checked) -> syn::Result<TokenStream> {
    let attrs = def.attrs.iter().filter(|a| !is_defaults(a));
    let vis = &def.vis;
    let name = &def.name;
    let name_str = name.to_string();
    let doc = doc_text(def);
    let params: Vec<String> = c.params.iter().map(|p| p.to_string()).collect();
    let inputs: Vec<String> = c.inputs.iter().map(|t| t.name.to_string()).collect();
    let output = c.stages[c.stages.len() - 1].name.to_string();
    let dag = dag_fn(def, c);
    let runtime = runtime_items(def, c);
    let registration = registration_items(def, c)?;
    Ok(quote! {
        #(#attrs)*
        #[allow(dead_code, non_snake_case, clippy::all)]
        #vis mod #name {
            /// The operator's name.
            pub const NAME: &str = #name_str;
            /// The doc comment of the definition.
            pub const DOC: &str = #doc;
            /// The shape parameters, in order of first appearance in the signature.
            pub const PARAMS: &[&str] = &[#(#params),*];
            /// The inputs, in argument order.
            pub const INPUTS: &[&str] = &[#(#inputs),*];
            /// The output's name.
            pub const OUTPUT: &str = #output;

            #dag
            #runtime
            #registration
        }
    })
}
