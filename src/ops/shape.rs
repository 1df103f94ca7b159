//! Named shape parameters of an operator and their parsing from `K=V,...`.

use super::error::OpError;

/// The largest value any shape parameter accepts.
pub const MAX_PARAM_VALUE: i64 = 1 << 20;

/// One named shape parameter of an operator.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    /// The name used in `--shape` (`M`, `stride`, …).
    pub name: &'static str,
    /// The value when not given; `None` makes the parameter required.
    pub default: Option<i64>,
    /// The smallest allowed value (1 for extents, 0 for padding).
    pub min: i64,
    /// What the parameter means.
    pub help: &'static str,
}

/// An extent-like parameter (at least 1).
pub(crate) const fn dim(name: &'static str, default: i64, help: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        default: Some(default),
        min: 1,
        help,
    }
}

/// A padding-like parameter (at least 0).
pub(crate) const fn pad(name: &'static str, default: i64, help: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        default: Some(default),
        min: 0,
        help,
    }
}

/// Concrete values for every parameter of an operator, in the registry's order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeParams {
    values: Vec<(&'static str, i64)>,
}

impl ShapeParams {
    /// The value of `name`. Panics only on a name the op does not declare,
    /// which is a bug in the op's definition, not in user input.
    pub fn get(&self, name: &str) -> i64 {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("op definition reads undeclared parameter '{name}'"))
    }

    /// All `(name, value)` pairs in declaration order.
    pub fn values(&self) -> &[(&'static str, i64)] {
        &self.values
    }

    /// `M=64,N=64,K=64`.
    pub fn to_text(&self) -> String {
        self.values
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Resolves `given` against `specs`: checks names and ranges, fills defaults.
pub(crate) fn resolve(
    op: &str,
    specs: &[ParamSpec],
    given: &[(String, i64)],
) -> Result<ShapeParams, OpError> {
    let mut values: Vec<(&'static str, Option<i64>)> =
        specs.iter().map(|s| (s.name, None)).collect();
    for (name, value) in given {
        let Some(slot) = values.iter_mut().find(|(n, _)| n == name) else {
            return Err(OpError::UnknownParam {
                op: op.into(),
                param: name.clone(),
                expected: specs.iter().map(|s| s.name).collect::<Vec<_>>().join(","),
            });
        };
        if slot.1.is_some() {
            return Err(OpError::DuplicateParam {
                op: op.into(),
                param: name.clone(),
            });
        }
        slot.1 = Some(*value);
    }
    let mut resolved = Vec::with_capacity(specs.len());
    for (spec, (name, value)) in specs.iter().zip(values) {
        let Some(value) = value.or(spec.default) else {
            return Err(OpError::MissingParam {
                op: op.into(),
                param: name.into(),
                expected: specs.iter().map(|s| s.name).collect::<Vec<_>>().join(","),
            });
        };
        if value < spec.min || value > MAX_PARAM_VALUE {
            return Err(OpError::OutOfRange {
                op: op.into(),
                param: name.into(),
                value,
                min: spec.min,
                max: MAX_PARAM_VALUE,
            });
        }
        resolved.push((name, value));
    }
    Ok(ShapeParams { values: resolved })
}

/// Parses `K=V,K=V` (spaces allowed around items; an empty text means all defaults).
pub(crate) fn parse_pairs(op: &str, text: &str) -> Result<Vec<(String, i64)>, OpError> {
    let mut pairs = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (name, value) = match item.split_once('=') {
            Some((n, v)) if !v.trim().is_empty() => (n.trim(), v.trim()),
            Some((n, _)) => (n.trim(), ""),
            None => (item, ""),
        };
        if value.is_empty() {
            return Err(OpError::MissingValue {
                op: op.into(),
                param: name.into(),
            });
        }
        let parsed = value.parse::<i64>().map_err(|_| OpError::NotAnInteger {
            op: op.into(),
            param: name.into(),
            value: value.into(),
        })?;
        pairs.push((name.to_string(), parsed));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPECS: &[ParamSpec] = &[dim("M", 8, "rows"), pad("pad", 1, "padding")];

    #[test]
    fn defaults_fill_missing_parameters() {
        let p = resolve("t", SPECS, &[("M".into(), 3)]).unwrap();
        assert_eq!(p.values(), &[("M", 3), ("pad", 1)]);
        assert_eq!(p.to_text(), "M=3,pad=1");
    }

    #[test]
    fn a_parameter_without_default_is_required() {
        const REQUIRED: &[ParamSpec] = &[ParamSpec {
            name: "N",
            default: None,
            min: 1,
            help: "rows",
        }];
        let missing = resolve("t", REQUIRED, &[]);
        assert!(
            matches!(&missing, Err(OpError::MissingParam { param, .. }) if param == "N"),
            "{missing:?}"
        );
        let given = resolve("t", REQUIRED, &[("N".into(), 5)]).unwrap();
        assert_eq!(given.to_text(), "N=5");
    }

    #[test]
    fn parse_rejects_bad_items() {
        assert!(matches!(
            parse_pairs("t", "M="),
            Err(OpError::MissingValue { .. })
        ));
        assert!(matches!(
            parse_pairs("t", "M"),
            Err(OpError::MissingValue { .. })
        ));
        assert!(matches!(
            parse_pairs("t", "M=x"),
            Err(OpError::NotAnInteger { .. })
        ));
        assert_eq!(
            parse_pairs("t", " M = 4 , pad=0").unwrap(),
            vec![("M".to_string(), 4), ("pad".to_string(), 0)]
        );
    }

    #[test]
    fn resolve_checks_ranges_and_names() {
        let zero = resolve("t", SPECS, &[("M".into(), 0)]);
        assert!(matches!(zero, Err(OpError::OutOfRange { value: 0, .. })));
        let pad0 = resolve("t", SPECS, &[("pad".into(), 0)]);
        assert!(pad0.is_ok());
        let huge = resolve("t", SPECS, &[("M".into(), MAX_PARAM_VALUE + 1)]);
        assert!(matches!(huge, Err(OpError::OutOfRange { .. })));
        let dup = resolve("t", SPECS, &[("M".into(), 2), ("M".into(), 3)]);
        assert!(matches!(dup, Err(OpError::DuplicateParam { .. })));
        let unknown = resolve("t", SPECS, &[("Q".into(), 2)]);
        assert!(matches!(unknown, Err(OpError::UnknownParam { .. })));
    }
}
