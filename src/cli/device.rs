//! `tessera device`: the host device description and its key.

use std::fmt::Write;

use serde_json::json;

use super::error::CliError;
use crate::runtime::{CacheLevel, host_device};

/// `tessera device [--json]`: the device key, the fields it hashes (arch,
/// vendor, model, cores, code-generator ISA features, caches); with `json`,
/// one JSON object `{"readable", "hash", "description"}` on one line.
pub(crate) fn device(json: bool) -> Result<String, CliError> {
    let description = host_device();
    let key = description.key();
    if json {
        let report = json!({
            "readable": key.readable,
            "hash": key.hash,
            "description": description,
        });
        return Ok(format!("{report}\n"));
    }
    let features = if description.features.is_empty() {
        "(none)".to_string()
    } else {
        description.features.join(", ")
    };
    let caches = if description.caches.is_empty() {
        "(unknown)".to_string()
    } else {
        description
            .caches
            .iter()
            .map(describe_cache)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::new();
    let _ = writeln!(out, "device:    {key}");
    let _ = writeln!(out, "key:       {}", key.hash);
    let _ = writeln!(out, "arch:      {}", description.arch);
    let _ = writeln!(out, "vendor:    {}", description.vendor);
    let _ = writeln!(out, "model:     {}", description.model);
    let _ = writeln!(out, "cores:     {}", description.cores);
    let _ = writeln!(out, "features:  {features}");
    let _ = writeln!(out, "caches:    {caches}");
    Ok(out)
}

/// `L1d 32 KiB`, `L2 1 MiB`, …: the label and the size in the largest binary
/// unit that divides it.
fn describe_cache(cache: &CacheLevel) -> String {
    format!("{} {}", cache.label(), binary_size(cache.size_bytes))
}

/// A byte count in the largest of GiB, MiB, KiB that divides it exactly.
fn binary_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    UNITS
        .iter()
        .find(|(unit, _)| bytes > 0 && bytes.is_multiple_of(*unit))
        .map(|(unit, name)| format!("{} {name}", bytes / unit))
        .unwrap_or_else(|| format!("{bytes} B"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_the_largest_exact_unit() {
        assert_eq!(binary_size(32 << 10), "32 KiB");
        assert_eq!(binary_size(1 << 20), "1 MiB");
        assert_eq!(binary_size(32 << 20), "32 MiB");
        assert_eq!(binary_size(1536 << 10), "1536 KiB");
        assert_eq!(binary_size(2 << 30), "2 GiB");
        assert_eq!(binary_size(100), "100 B");
        assert_eq!(binary_size(0), "0 B");
    }

    #[test]
    fn text_lists_every_field() {
        let text = device(false).expect("device text");
        let key = host_device().key();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8, "{text}");
        assert_eq!(lines[0], format!("device:    {key}"));
        assert_eq!(lines[1], format!("key:       {}", key.hash));
        for (line, name) in lines.iter().zip([
            "device:",
            "key:",
            "arch:",
            "vendor:",
            "model:",
            "cores:",
            "features:",
            "caches:",
        ]) {
            assert!(line.starts_with(name), "{line}");
        }
    }

    #[test]
    fn json_is_one_object() {
        let text = device(true).expect("device json");
        assert_eq!(text.lines().count(), 1);
        let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let key = host_device().key();
        assert_eq!(value["readable"], key.readable.as_str());
        assert_eq!(value["hash"], key.hash.as_str());
        let description: crate::runtime::DeviceDescription =
            serde_json::from_value(value["description"].clone()).expect("description");
        assert_eq!(&description, host_device());
    }
}
