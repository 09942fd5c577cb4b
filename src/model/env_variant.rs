//! An environment variant: variables a case's worker runs under beyond clhip's own, named by a
//! case file's `[[variant]]` (`HSA_ENABLE_SDMA=0`). The variant is part of the case: two runs of
//! one case under two environments are two cases, with two ids.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// What starts a variant's segment in a case id: `.../n=4096/env:HSA_ENABLE_SDMA=0`.
pub const ID_PREFIX: &str = "env:";

/// Variables, by name, with their values. Empty: the plain environment, whose cases keep the
/// ids and results-file records they had before variants existed.
///
/// Names and values are held to the characters a case id can carry unescaped (see
/// [`check_name`], [`check_value`]); a results file whose variant breaks that is refused when
/// read, as any other corrupt record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, String>",
    into = "BTreeMap<String, String>"
)]
pub struct EnvVariant(BTreeMap<String, String>);

impl EnvVariant {
    /// The variant of `vars`, each name and value checked; a name given twice is refused.
    pub fn new<K: Into<String>, V: Into<String>>(
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, String> {
        let mut map = BTreeMap::new();
        for (name, value) in vars {
            let (name, value) = (name.into(), value.into());
            check_name(&name)?;
            check_value(&name, &value)?;
            if map.insert(name.clone(), value).is_some() {
                return Err(format!("`{name}` is set twice"));
            }
        }
        Ok(EnvVariant(map))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Each variable and its value, by name.
    pub fn vars(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The id segment after `/`: `env:AMD_SERIALIZE_COPY=3+HSA_ENABLE_SDMA=0` (names in
    /// byte order, so one environment has one spelling). Empty for the plain environment.
    pub fn id_segment(&self) -> String {
        if self.is_empty() {
            String::new()
        } else {
            format!("{ID_PREFIX}{self}")
        }
    }

    /// The variant an id segment spells (`env:A=1+B=2`), for ids read back (`repro`).
    pub fn parse_segment(segment: &str) -> Result<Self, String> {
        let usage = "expected `env:NAME=value[+NAME=value]...`";
        let body = segment
            .strip_prefix(ID_PREFIX)
            .ok_or_else(|| format!("`{segment}`: {usage}"))?;
        let vars = body
            .split('+')
            .map(|kv| {
                kv.split_once('=')
                    .ok_or_else(|| format!("`{segment}`: `{kv}` has no `=`; {usage}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let variant = EnvVariant::new(vars).map_err(|e| format!("`{segment}`: {e}"))?;
        // One environment, one id: a segment out of order would name a case no plan holds.
        if variant.id_segment() != segment {
            return Err(format!(
                "`{segment}`: names must come in byte order, once each: `{}`",
                variant.id_segment()
            ));
        }
        Ok(variant)
    }
}

/// `A=1+B=2`: joined by `+`, not `,`, which would split the id in a baseline's
/// `case-id,outcome` line and in comma-separated options (`--plant-only`).
impl fmt::Display for EnvVariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (k, v) in &self.0 {
            if !first {
                f.write_str("+")?;
            }
            first = false;
            write!(f, "{k}={v}")?;
        }
        Ok(())
    }
}

impl TryFrom<BTreeMap<String, String>> for EnvVariant {
    type Error = String;
    fn try_from(map: BTreeMap<String, String>) -> Result<Self, String> {
        EnvVariant::new(map)
    }
}

impl From<EnvVariant> for BTreeMap<String, String> {
    fn from(v: EnvVariant) -> Self {
        v.0
    }
}

/// Prefixes of variables a variant may not set: clhip's own (`CLHIP_`), the OpenCL ICD
/// loader's (`OCL_ICD_`: each worker loads its pair's one vendor library through them), and
/// the dynamic loader's (`LD_`: another library is another driver, which the probe must see).
pub const RESERVED_PREFIXES: [&str; 3] = ["CLHIP_", "OCL_ICD_", "LD_"];

/// A variable name as POSIX spells a portable one (upper-case letters, digits, `_`, not
/// starting with a digit), and none clhip keeps for itself.
pub fn check_name(name: &str) -> Result<(), String> {
    let portable = name
        .chars()
        .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit());
    if !portable {
        return Err(format!(
            "`{name}` is no variable name a variant can set (upper-case letters, digits and `_`, not starting with a digit)"
        ));
    }
    if let Some(p) = RESERVED_PREFIXES.iter().find(|p| name.starts_with(*p)) {
        return Err(format!(
            "`{name}`: variables starting with `{p}` are clhip's to set for its workers ({} are reserved)",
            RESERVED_PREFIXES.join(", ")
        ));
    }
    Ok(())
}

/// A value a case id can carry as it is: not empty, of ASCII letters, digits and `_ . : -`
/// (no `/`, which separates an id's segments, no `+` or `=`, which separate a variant's
/// variables, no `,`, which separates a baseline line's fields, no `*`, the filters' wildcard,
/// no space).
pub fn check_value(name: &str, value: &str) -> Result<(), String> {
    let ok = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` = `{value}`: a variant's value must be non-empty ASCII letters, digits and `_ . : -` (it is spelled in the case id)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variant_is_spelled_one_way_and_read_back() {
        let v = EnvVariant::new([("HSA_XNACK", "1"), ("AMD_SERIALIZE_COPY", "3")]).unwrap();
        assert_eq!(v.id_segment(), "env:AMD_SERIALIZE_COPY=3+HSA_XNACK=1");
        assert_eq!(EnvVariant::parse_segment(&v.id_segment()), Ok(v.clone()));
        assert_eq!(EnvVariant::default().id_segment(), "");
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(json, r#"{"AMD_SERIALIZE_COPY":"3","HSA_XNACK":"1"}"#);
        assert_eq!(serde_json::from_str::<EnvVariant>(&json).unwrap(), v);
    }

    #[test]
    fn names_and_values_that_would_break_an_id_or_the_worker_are_refused() {
        for (name, value, says) in [
            ("hsa_xnack", "1", "no variable name"),
            ("1ABC", "1", "no variable name"),
            ("", "1", "no variable name"),
            ("CLHIP_OPENCL_AS", "x", "clhip's to set"),
            ("OCL_ICD_FILENAMES", "libx.so", "clhip's to set"),
            ("LD_PRELOAD", "x.so", "clhip's to set"),
            ("A", "", "non-empty"),
            ("A", "a/b", "non-empty"),
            ("A", "a,b", "non-empty"),
            ("A", "a+b", "non-empty"),
            ("A", "a=b", "non-empty"),
            ("A", "a*", "non-empty"),
            ("A", "a b", "non-empty"),
        ] {
            let e = EnvVariant::new([(name, value)]).unwrap_err();
            assert!(e.contains(says), "{name}={value}: {e}");
        }
        // A results file cannot smuggle one in either.
        let e = serde_json::from_str::<EnvVariant>(r#"{"A":"x/y"}"#).unwrap_err();
        assert!(e.to_string().contains("non-empty"), "{e}");
    }

    #[test]
    fn a_segment_out_of_order_or_malformed_is_refused() {
        for bad in [
            "env:B=1+A=2",
            "env:A=1+A=1",
            "A=1",
            "env:A",
            "env:",
            "env:A=1+",
            "env:A=1,B=2",
        ] {
            assert!(EnvVariant::parse_segment(bad).is_err(), "{bad}");
        }
    }
}
