use std::path::Path;

use serde_json::Value;

use super::*;

/// Every device record that files in reports/ and tests/fixtures/ hold: each runtime's in the
/// fingerprint of a results or bench file, and each device runtime's in a probe file.
fn committed_device_records() -> Vec<(String, Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in ["reports", "tests/fixtures"] {
        let mut files: Vec<_> = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        for file in files {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let mut runtimes: Vec<&Value> = Vec::new();
            if let Some(Value::Array(rs)) = v.pointer("/fingerprint/runtimes") {
                runtimes.extend(rs);
            }
            runtimes.extend(["/hip", "/cuda"].iter().filter_map(|p| v.pointer(p)));
            if let Some(Value::Array(installs)) = v.get("hip_installs") {
                runtimes.extend(installs.iter().filter_map(|i| i.get("runtime")));
            }
            for r in runtimes {
                if let Some(Value::Array(devices)) = r.get("devices") {
                    let name = file.strip_prefix(root).unwrap().display().to_string();
                    out.extend(devices.iter().map(|d| (name.clone(), d.clone())));
                }
            }
        }
    }
    out
}

/// The runtimes, the probe and the fingerprint share one device record: what committed files
/// hold of it reads into it and writes back unchanged, field for field.
#[test]
fn committed_device_records_read_and_write_back_unchanged() {
    let records = committed_device_records();
    assert!(records.len() >= 30, "only {} device records", records.len());
    for (file, json) in records {
        let device: DeviceInfo =
            serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("{file}: {e}: {json}"));
        assert_eq!(serde_json::to_value(&device).unwrap(), json, "{file}");
    }
}

/// A results file's whole fingerprint, too, reads and writes back unchanged.
#[test]
fn committed_fingerprints_read_and_write_back_unchanged() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports");
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let Some(json) = v.get("fingerprint") else {
            continue;
        };
        let fingerprint: Fingerprint = serde_json::from_value(json.clone())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            &serde_json::to_value(&fingerprint).unwrap(),
            json,
            "{}",
            path.display()
        );
        read += 1;
    }
    assert!(read >= 10, "only {read} fingerprints in reports/");
}
