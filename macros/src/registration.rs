//! What an op needs to be registered: `#[defaults(P = V, …)]`, each shape
//! parameter's range and help text, and the one-line description that
//! `tessera ops` prints.

use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Ident, LitInt, Token};

use crate::check::{Checked, Extent};
use crate::parse::OpDef;

/// The attribute that gives shape parameters their default values.
pub const DEFAULTS_ATTR: &str = "defaults";

/// One shape parameter as the registry sees it.
pub struct ParamInfo {
    pub name: String,
    pub default: Option<i64>,
    pub min: i64,
    pub help: String,
}

struct Assignment {
    name: Ident,
    value: LitInt,
}

impl Parse for Assignment {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let value: LitInt = input.parse()?;
        Ok(Assignment { name, value })
    }
}

/// True for `#[defaults(…)]`, which the expansion consumes instead of
/// passing on to the module.
pub fn is_defaults(attr: &Attribute) -> bool {
    attr.path().is_ident(DEFAULTS_ATTR)
}

/// Each parameter's name, default, smallest value and help, in `PARAMS` order.
pub fn param_infos(def: &OpDef, c: &Checked) -> syn::Result<Vec<ParamInfo>> {
    let mut infos: Vec<ParamInfo> = c
        .params
        .iter()
        .enumerate()
        .map(|(p, name)| ParamInfo {
            name: name.to_string(),
            default: None,
            min: 1,
            help: format!("dimension of {}", tensors_sized_by(c, p).join(", ")),
        })
        .collect();
    let mut seen: Vec<Ident> = Vec::new();
    for attr in def.attrs.iter().filter(|a| is_defaults(a)) {
        let assignments =
            attr.parse_args_with(Punctuated::<Assignment, Token![,]>::parse_terminated)?;
        for a in assignments {
            let Some(info) = infos.iter_mut().find(|i| a.name == i.name) else {
                let known: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
                return Err(syn::Error::new(
                    a.name.span(),
                    format!(
                        "`{}` is not a shape parameter of this op; its parameters are {}",
                        a.name,
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            };
            if seen.contains(&a.name) {
                return Err(syn::Error::new(
                    a.name.span(),
                    format!("`{}` has a default already", a.name),
                ));
            }
            seen.push(a.name.clone());
            let value: i64 = a.value.base10_parse()?;
            if value < info.min {
                return Err(syn::Error::new(
                    a.value.span(),
                    format!(
                        "`{}` must be at least {} ({}), got {value}",
                        a.name, info.min, info.help
                    ),
                ));
            }
            info.default = Some(value);
        }
    }
    Ok(infos)
}

/// The inputs and the output with a dimension of extent parameter `p`
/// (every parameter is one: parameters come from the signature).
fn tensors_sized_by(c: &Checked, p: usize) -> Vec<String> {
    let uses = |shape: &[Extent]| {
        shape
            .iter()
            .any(|e| matches!(e, Extent::Param(q) if *q == p))
    };
    let output = c.stages.last();
    c.inputs
        .iter()
        .filter(|t| uses(&t.shape))
        .map(|t| t.name.to_string())
        .chain(
            output
                .filter(|s| uses(&s.shape))
                .map(|s| s.name.to_string()),
        )
        .collect()
}

/// `x[M,K], w[N,K] → out[M,N]`, from the checked tensors.
fn signature(c: &Checked) -> String {
    let dims = |shape: &[Extent]| -> String {
        shape
            .iter()
            .map(|e| match e {
                Extent::Param(p) => c.params[*p].to_string(),
                Extent::Lit(v) => v.to_string(),
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    let inputs: Vec<String> = c
        .inputs
        .iter()
        .map(|t| format!("{}[{}]", t.name, dims(&t.shape)))
        .collect();
    let output = c
        .stages
        .last()
        .map(|s| format!("{}[{}]", s.name, dims(&s.shape)))
        .unwrap_or_default();
    format!("{} → {output}", inputs.join(", "))
}

/// The doc comment's first line, then the signature.
pub fn description(doc: &str, c: &Checked) -> String {
    let first = doc.lines().next().unwrap_or("").trim();
    if first.is_empty() {
        signature(c)
    } else {
        format!("{first} ({})", signature(c))
    }
}
