//! The host device: what the CPU is ([`DeviceDescription`]) and the
//! [`DeviceKey`] that tuning records are filed under.
//!
//! Measurements depend on the architecture, the CPU vendor and model, the ISA
//! features the code generator uses, the core count and the cache sizes; the
//! key is a SHA-256 of all of them, so two machines with the same key may
//! share tuning records.

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The first line of the canonical text; change it when the text changes, so
/// that keys of different formats never collide.
const FORMAT_VERSION: &str = "tessera-device-v1";

/// The longest model part of a readable key, in characters.
const MODEL_SLUG_MAX: usize = 48;

/// The longest vendor part of a readable key, in characters.
const VENDOR_SLUG_MAX: usize = 16;

/// What the measurements of a kernel depend on: the host CPU as the code
/// generator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceDescription {
    /// The architecture, as in [`std::env::consts::ARCH`] (`x86_64`, `aarch64`).
    pub arch: String,
    /// The CPU vendor, e.g. `AuthenticAMD` or `GenuineIntel` (`unknown` when
    /// the system does not say).
    pub vendor: String,
    /// The CPU model, e.g. `AMD EPYC 7R13 Processor` (`unknown` when the
    /// system does not say).
    pub model: String,
    /// The ISA flags of the code generator that are on for this host, such as
    /// `has_avx2`, sorted.
    pub features: Vec<String>,
    /// The number of threads the host can run in parallel.
    pub cores: usize,
    /// The caches of the first CPU, sorted by level and kind.
    pub caches: Vec<CacheLevel>,
}

/// One cache of a CPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheLevel {
    /// The level: 1 for L1, 2 for L2, …
    pub level: u8,
    /// `data`, `instruction` or `unified`.
    pub kind: String,
    /// The size in bytes.
    pub size_bytes: u64,
}

impl CacheLevel {
    /// The short name of the cache: `L1d`, `L1i`, `L2`, …
    pub fn label(&self) -> String {
        let suffix = match self.kind.as_str() {
            "data" => "d",
            "instruction" => "i",
            "unified" => "",
            other => return format!("L{}-{other}", self.level),
        };
        format!("L{}{suffix}", self.level)
    }
}

/// Identifies a device: hosts with equal keys may share tuning records.
///
/// The hash alone decides identity; the readable part is a label such as
/// `x86_64-amd-epyc-2c-avx512`, safe to use as a file or directory name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeviceKey {
    /// SHA-256 of the canonical text of the description, 64 lowercase hex digits.
    pub hash: String,
    /// A short, filesystem-safe name (lowercase `[a-z0-9._-]` only).
    pub readable: String,
}

impl DeviceKey {
    /// The first 12 hex digits of the hash, for display.
    pub fn short_hash(&self) -> &str {
        &self.hash[..self.hash.len().min(12)]
    }
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.readable, self.short_hash())
    }
}

impl DeviceDescription {
    /// Describes the host: architecture, CPU vendor and model (from
    /// `/proc/cpuinfo`), the code generator's ISA flags, the core count and
    /// the caches (from `/sys`). Whatever cannot be read is left `unknown`
    /// or empty; this never panics.
    pub fn detect() -> DeviceDescription {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let vendor = cpuinfo_field(&cpuinfo, &["vendor_id", "CPU implementer"])
            .unwrap_or_else(|| "unknown".to_string());
        let model = cpuinfo_field(&cpuinfo, &["model name", "Model", "CPU part"])
            .unwrap_or_else(|| "unknown".to_string());
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        DeviceDescription {
            arch: std::env::consts::ARCH.to_string(),
            vendor,
            model,
            features: host_features(),
            cores,
            caches: read_caches(Path::new("/sys/devices/system/cpu/cpu0/cache")),
        }
    }

    /// The canonical text the key hashes: a format version line, then one
    /// `name=value` line per field. Features are sorted and deduplicated and
    /// caches sorted, so the order they were listed in does not matter.
    fn canonical_text(&self) -> String {
        let mut features: Vec<&str> = self.features.iter().map(String::as_str).collect();
        features.sort_unstable();
        features.dedup();
        let mut caches: Vec<&CacheLevel> = self.caches.iter().collect();
        caches.sort_by(|a, b| {
            (a.level, &a.kind, a.size_bytes).cmp(&(b.level, &b.kind, b.size_bytes))
        });
        let caches: Vec<String> = caches
            .iter()
            .map(|c| format!("{}={}", c.label(), c.size_bytes))
            .collect();
        format!(
            "{FORMAT_VERSION}\narch={}\nvendor={}\nmodel={}\nfeatures={}\ncores={}\ncaches={}\n",
            escape(&self.arch),
            escape(&self.vendor),
            escape(&self.model),
            escape(&features.join(",")),
            self.cores,
            escape(&caches.join(",")),
        )
    }

    /// The key of this device: a stable hash of every field plus a readable name.
    pub fn key(&self) -> DeviceKey {
        let digest = Sha256::digest(self.canonical_text().as_bytes());
        let hash = digest.iter().map(|b| format!("{b:02x}")).collect();
        DeviceKey {
            hash,
            readable: self.readable(),
        }
    }

    /// The readable name: arch, vendor, model words, `Nc`, widest vector ISA.
    fn readable(&self) -> String {
        let vendor = vendor_short(&self.vendor);
        let model = model_slug(&self.model, &vendor);
        let mut parts = vec![slug(&self.arch, 32), vendor];
        if !model.is_empty() {
            parts.push(model);
        }
        parts.push(format!("{}c", self.cores));
        if let Some(isa) = self.widest_vector_isa() {
            parts.push(isa.to_string());
        }
        let parts: Vec<String> = parts.into_iter().filter(|p| !p.is_empty()).collect();
        slug(&parts.join("-"), usize::MAX)
    }

    /// The widest vector ISA the code generator may use, for the readable name.
    fn widest_vector_isa(&self) -> Option<&'static str> {
        let has = |name: &str| self.features.iter().any(|f| f == name);
        if self.arch == "aarch64" {
            return Some("neon");
        }
        [
            ("has_avx512f", "avx512"),
            ("has_avx2", "avx2"),
            ("has_avx", "avx"),
            ("has_sse42", "sse4.2"),
        ]
        .into_iter()
        .find(|(flag, _)| has(flag))
        .map(|(_, label)| label)
    }
}

/// The host's description, detected once per process.
pub fn host_device() -> &'static DeviceDescription {
    static HOST: OnceLock<DeviceDescription> = OnceLock::new();
    HOST.get_or_init(DeviceDescription::detect)
}

/// Escapes backslashes and line breaks so that every field stays on its line.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

/// The value of the first of `keys` that `/proc/cpuinfo` has (first processor
/// wins), trimmed; `None` if none has a non-empty value.
fn cpuinfo_field(cpuinfo: &str, keys: &[&str]) -> Option<String> {
    keys.iter().find_map(|key| {
        cpuinfo.lines().find_map(|line| {
            let (name, value) = line.split_once(':')?;
            let value = value.trim();
            (name.trim() == *key && !value.is_empty()).then(|| value.to_string())
        })
    })
}

/// The boolean ISA flags of the host ISA that are on, sorted; empty if the
/// host ISA cannot be built.
fn host_features() -> Vec<String> {
    let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
    let Ok(builder) = cranelift_native::builder() else {
        return Vec::new();
    };
    let Ok(isa) = builder.finish(flags) else {
        return Vec::new();
    };
    let mut features: Vec<String> = isa
        .isa_flags()
        .iter()
        .filter(|v| v.as_bool() == Some(true))
        .map(|v| v.name.to_string())
        .collect();
    features.sort_unstable();
    features.dedup();
    features
}

/// The caches listed under `dir` (`index*/{level,type,size}`), sorted by
/// (level, kind); entries that cannot be read are skipped.
fn read_caches(dir: &Path) -> Vec<CacheLevel> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let read = |path: &Path, name: &str| -> Option<String> {
        std::fs::read_to_string(path.join(name))
            .ok()
            .map(|s| s.trim().to_string())
    };
    let mut caches: Vec<CacheLevel> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with("index"))
        .filter_map(|e| {
            let path = e.path();
            let level = read(&path, "level")?.parse::<u8>().ok()?;
            let kind = read(&path, "type")?.to_ascii_lowercase();
            let size_bytes = parse_cache_size(&read(&path, "size")?)?;
            Some(CacheLevel {
                level,
                kind,
                size_bytes,
            })
        })
        .collect();
    caches.sort_by(|a, b| (a.level, &a.kind, a.size_bytes).cmp(&(b.level, &b.kind, b.size_bytes)));
    caches
}

/// Parses a cache size as `/sys` writes it: digits and an optional `K`, `M`
/// or `G` (binary units), e.g. `32K`, `1024K`, `32M`.
fn parse_cache_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, multiplier) = match text.char_indices().last()? {
        (i, 'K' | 'k') => (&text[..i], 1u64 << 10),
        (i, 'M' | 'm') => (&text[..i], 1 << 20),
        (i, 'G' | 'g') => (&text[..i], 1 << 30),
        _ => (text, 1),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(multiplier)
}

/// The short vendor name: `amd`, `intel`, `arm`, … or the vendor slugged.
fn vendor_short(vendor: &str) -> String {
    let lower = vendor.trim().to_ascii_lowercase();
    let known = match lower.as_str() {
        "authenticamd" => Some("amd"),
        "genuineintel" => Some("intel"),
        "hygongenuine" => Some("hygon"),
        "centaurhauls" => Some("centaur"),
        "shanghai" => Some("zhaoxin"),
        // ARM implementer codes (`CPU implementer` in /proc/cpuinfo).
        "0x41" => Some("arm"),
        "0x42" => Some("broadcom"),
        "0x43" => Some("cavium"),
        "0x46" => Some("fujitsu"),
        "0x48" => Some("hisilicon"),
        "0x4e" => Some("nvidia"),
        "0x50" => Some("apm"),
        "0x51" => Some("qualcomm"),
        "0x61" => Some("apple"),
        "0xc0" => Some("ampere"),
        _ => None,
    };
    match known {
        Some(name) => name.to_string(),
        None => {
            let s = slug(&lower, VENDOR_SLUG_MAX);
            if s.is_empty() {
                "unknown".to_string()
            } else {
                s
            }
        }
    }
}

/// The model's words, slugged: trademarks, the clock after `@`, `CPU`,
/// `Processor`, `unknown` and the vendor's own name dropped; at most
/// [`MODEL_SLUG_MAX`] characters, cut at a word boundary where possible.
fn model_slug(model: &str, vendor_short: &str) -> String {
    let lower = model.to_ascii_lowercase();
    let lower = lower.split('@').next().unwrap_or_default();
    let lower = lower
        .replace("(r)", " ")
        .replace("(tm)", " ")
        .replace("(c)", " ");
    let mut out = String::new();
    for word in lower.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.')) {
        let word = word.trim_matches('.');
        if word.is_empty()
            || word == "cpu"
            || word == "processor"
            || word == "unknown"
            || word == vendor_short
        {
            continue;
        }
        let extra = word.len() + usize::from(!out.is_empty());
        if out.len() + extra > MODEL_SLUG_MAX {
            if out.is_empty() {
                out = slug(word, MODEL_SLUG_MAX);
            }
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(word);
    }
    slug(&out, MODEL_SLUG_MAX)
}

/// Lowercases `text`, maps every character outside `[a-z0-9._]` to `-`,
/// collapses runs of `-`, trims `-` and `.` at the ends and keeps at most
/// `max` characters.
fn slug(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_' {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    out.truncate(max.min(out.len()));
    out.trim_matches(|c| c == '-' || c == '.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> DeviceDescription {
        DeviceDescription {
            arch: "x86_64".to_string(),
            vendor: "AuthenticAMD".to_string(),
            model: "AMD EPYC".to_string(),
            features: ["has_avx", "has_avx2", "has_avx512f", "has_fma", "has_sse42"]
                .map(String::from)
                .to_vec(),
            cores: 2,
            caches: vec![
                CacheLevel {
                    level: 1,
                    kind: "data".to_string(),
                    size_bytes: 32 << 10,
                },
                CacheLevel {
                    level: 1,
                    kind: "instruction".to_string(),
                    size_bytes: 32 << 10,
                },
                CacheLevel {
                    level: 2,
                    kind: "unified".to_string(),
                    size_bytes: 1 << 20,
                },
                CacheLevel {
                    level: 3,
                    kind: "unified".to_string(),
                    size_bytes: 32 << 20,
                },
            ],
        }
    }

    fn is_fs_safe(s: &str) -> bool {
        !s.is_empty()
            && !s.starts_with('.')
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
    }

    fn is_hex64(s: &str) -> bool {
        s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }

    #[test]
    fn detected_key_is_stable() {
        let a = DeviceDescription::detect();
        let b = DeviceDescription::detect();
        assert_eq!(a, b);
        assert_eq!(a.key(), b.key());
        assert_eq!(host_device().key(), a.key());
        assert!(is_hex64(&a.key().hash));
        assert!(is_fs_safe(&a.key().readable), "{}", a.key().readable);
        assert!(a.cores >= 1);
        assert!(a.features.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn sample_key_is_pinned() {
        let key = sample().key();
        assert_eq!(key.readable, "x86_64-amd-epyc-2c-avx512");
        assert!(is_hex64(&key.hash));
        assert_eq!(key.hash, sample().key().hash);
        assert_eq!(key.short_hash().len(), 12);
        assert_eq!(
            key.to_string(),
            format!("x86_64-amd-epyc-2c-avx512#{}", &key.hash[..12])
        );
        assert_eq!(
            key.hash,
            "5be4f9c01767395b74f9a0a59d29011895ff3915194976922287a9efa9df3af6"
        );
    }

    #[test]
    fn canonical_text_lists_every_field() {
        assert_eq!(
            sample().canonical_text(),
            "tessera-device-v1\narch=x86_64\nvendor=AuthenticAMD\nmodel=AMD EPYC\n\
             features=has_avx,has_avx2,has_avx512f,has_fma,has_sse42\ncores=2\n\
             caches=L1d=32768,L1i=32768,L2=1048576,L3=33554432\n"
        );
    }

    #[test]
    fn listing_order_does_not_change_the_hash() {
        let mut d = sample();
        d.features.reverse();
        d.caches.reverse();
        assert_eq!(d.key(), sample().key());
    }

    #[test]
    fn masking_a_feature_changes_the_hash() {
        let mut d = sample();
        d.features.retain(|f| f != "has_avx2");
        assert_ne!(d.key().hash, sample().key().hash);
    }

    #[test]
    fn core_count_changes_the_hash() {
        let mut d = sample();
        d.cores = 4;
        assert_ne!(d.key().hash, sample().key().hash);
        assert_eq!(d.key().readable, "x86_64-amd-epyc-4c-avx512");
    }

    #[test]
    fn cache_size_changes_the_hash() {
        let mut d = sample();
        d.caches[3].size_bytes = 16 << 20;
        assert_ne!(d.key().hash, sample().key().hash);
        assert_eq!(d.key().readable, sample().key().readable);
    }

    #[test]
    fn other_fields_change_the_hash() {
        let base = sample().key().hash;
        let mut d = sample();
        d.model = "AMD EPYC 7R13 Processor".to_string();
        assert_ne!(d.key().hash, base);
        let mut d = sample();
        d.vendor = "GenuineIntel".to_string();
        assert_ne!(d.key().hash, base);
        let mut d = sample();
        d.arch = "aarch64".to_string();
        assert_ne!(d.key().hash, base);
        let mut d = sample();
        d.caches[0].kind = "unified".to_string();
        assert_ne!(d.key().hash, base);
    }

    #[test]
    fn readable_is_filesystem_safe_for_odd_models() {
        let mut d = sample();
        d.vendor = "GenuineIntel".to_string();
        d.model = "Intel(R) Xeon(R) CPU @ 2.20GHz".to_string();
        d.features.retain(|f| f != "has_avx512f");
        assert_eq!(d.key().readable, "x86_64-intel-xeon-2c-avx2");

        for model in [
            "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz",
            "../../etc/passwd",
            "  Weird/Model\\Name: \"quoted\" <x> * ? |  ",
            "ÄÖÜ ünïcödé ☃",
            "",
            "...",
            "a very long model name with many many words that goes on and on and on forever",
        ] {
            d.model = model.to_string();
            let readable = d.key().readable;
            assert!(is_fs_safe(&readable), "{model:?} -> {readable:?}");
            assert!(!readable.contains(".."), "{model:?} -> {readable:?}");
            assert!(readable.len() <= 100, "{model:?} -> {readable:?}");
        }
        d.model = "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz".to_string();
        assert_eq!(d.key().readable, "x86_64-intel-xeon-platinum-8375c-2c-avx2");
    }

    #[test]
    fn readable_names_vendors_and_isas() {
        let mut d = sample();
        d.arch = "aarch64".to_string();
        d.vendor = "0x41".to_string();
        d.model = "unknown".to_string();
        d.features = vec!["has_lse".to_string()];
        assert_eq!(d.key().readable, "aarch64-arm-2c-neon");
        let mut d = sample();
        d.vendor = "unknown".to_string();
        d.model = "unknown".to_string();
        d.features.clear();
        assert_eq!(d.key().readable, "x86_64-unknown-2c");
        d.features = vec!["has_sse42".to_string()];
        assert_eq!(d.key().readable, "x86_64-unknown-2c-sse4.2");
    }

    #[test]
    fn cache_sizes_parse() {
        assert_eq!(parse_cache_size("32K"), Some(32 * 1024));
        assert_eq!(parse_cache_size("1024K"), Some(1024 * 1024));
        assert_eq!(parse_cache_size("32M"), Some(32 * 1024 * 1024));
        assert_eq!(parse_cache_size("1G"), Some(1 << 30));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size(" 48K\n"), Some(48 * 1024));
        for garbage in [
            "",
            "K",
            "abc",
            "32KB",
            "-32K",
            "3.5M",
            "32 K",
            "99999999999999999999G",
        ] {
            assert_eq!(parse_cache_size(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn caches_read_from_a_sysfs_tree() {
        let dir = std::env::temp_dir().join(format!("tessera-device-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let entries = [
            ("index0", "1", "Data", "48K"),
            ("index1", "1", "Instruction", "32K"),
            ("index2", "2", "Unified", "2048K"),
            ("index3", "3", "Unified", "garbage"),
        ];
        for (name, level, kind, size) in entries {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).expect("create test dir");
            std::fs::write(d.join("level"), format!("{level}\n")).expect("write level");
            std::fs::write(d.join("type"), format!("{kind}\n")).expect("write type");
            std::fs::write(d.join("size"), format!("{size}\n")).expect("write size");
        }
        let caches = read_caches(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        let labels: Vec<(String, u64)> = caches.iter().map(|c| (c.label(), c.size_bytes)).collect();
        assert_eq!(
            labels,
            vec![
                ("L1d".to_string(), 48 << 10),
                ("L1i".to_string(), 32 << 10),
                ("L2".to_string(), 2 << 20)
            ]
        );
        assert!(read_caches(Path::new("/nonexistent/tessera")).is_empty());
    }

    #[test]
    fn cpuinfo_fields_fall_back() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\n\n\
                   processor\t: 1\nvendor_id\t: Other\n";
        assert_eq!(
            cpuinfo_field(x86, &["vendor_id"]).as_deref(),
            Some("GenuineIntel")
        );
        let arm = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n";
        assert_eq!(
            cpuinfo_field(arm, &["vendor_id", "CPU implementer"]).as_deref(),
            Some("0x41")
        );
        assert_eq!(
            cpuinfo_field(arm, &["model name", "Model", "CPU part"]).as_deref(),
            Some("0xd0c")
        );
        assert_eq!(cpuinfo_field("", &["vendor_id"]), None);
        assert_eq!(cpuinfo_field("vendor_id\t:\n", &["vendor_id"]), None);
    }

    #[test]
    fn key_round_trips_through_json() {
        let d = sample();
        let text = serde_json::to_string(&d).expect("serialize");
        let back: DeviceDescription = serde_json::from_str(&text).expect("deserialize");
        assert_eq!(back, d);
        let key = d.key();
        let text = serde_json::to_string(&key).expect("serialize");
        let back: DeviceKey = serde_json::from_str(&text).expect("deserialize");
        assert_eq!(back, key);
    }
}
