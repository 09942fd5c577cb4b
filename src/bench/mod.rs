//! Benchmarks: `clhip bench refs` (the CPU references), `clhip bench runner` (the runner's own
//! cost) and `clhip bench interop` (what each interop path costs and saves, measured on the
//! pair's own devices).
//!
//! `bench interop` is split by side: `interop` is the parent (the plan, one child process per
//! pair and path, how a child ended), `measure` the child (the timed loops), `results` the
//! record both speak and the JSON file, `render` the console and Markdown tables, `plot` the
//! SVG.

pub mod interop;
pub mod measure;
pub mod plot;
pub mod refs;
pub mod render;
pub mod results;
pub mod runner;
pub mod starts;

pub use refs::run_refs;
pub use runner::{RunnerConfig, run_runner, runner_configs};

/// The sizes `bench interop` measures unless told otherwise: powers of 8 from 4 KiB to 128 MiB,
/// plus the pipeline's 32 MiB vector (docs/domain.md#the-mi100-notes) (the size the acceptance compares at, and the pipeline's) and
/// 512 MiB, the top of the range the issue asks for.
pub const DEFAULT_SIZES: &[u64] = &[
    4 << 10,
    32 << 10,
    256 << 10,
    2 << 20,
    16 << 20,
    32 << 20,
    128 << 20,
    512 << 20,
];

/// The largest buffer `bench interop` measures by default.
pub const DEFAULT_MAX_SIZE: u64 = 512 << 20;

/// A byte count as people write it: `4096`, `4K`, `4KiB`, `32M`, `1GiB` (binary units, case
/// ignored). A bench size must also hold whole complex f32 elements and fit the check kernels'
/// 32-bit word index: see [`check_bench_size`].
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return Err(format!(
            "`{s}` is not a size: expected a number of bytes with an optional K, M or G (binary: 4K = 4096)"
        ));
    }
    let number: u64 = t[..digits].parse().map_err(|e| format!("`{s}`: {e}"))?;
    let shift = match t[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        unit => {
            return Err(format!(
                "`{s}`: unknown unit `{unit}` (expected K, M or G, binary: 4K = 4096)"
            ));
        }
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("`{s}` does not fit in 64 bits"))
}

/// Why `bytes` cannot be a bench size, if it cannot: at least one complex f32 element (8 bytes),
/// whole elements, and at most 2^32 32-bit words (the pattern kernels index words with a
/// `uint`), i.e. below 16 GiB.
pub fn check_bench_size(bytes: u64) -> Result<u64, String> {
    if bytes < 8 || !bytes.is_multiple_of(8) {
        return Err(format!(
            "{bytes} bytes is not a whole number of complex f32 elements (8 bytes each, at least one)"
        ));
    }
    if bytes / 4 > u64::from(u32::MAX) {
        return Err(format!(
            "{bytes} bytes is more than the pattern kernels' 32-bit word index reaches (16 GiB)"
        ));
    }
    Ok(bytes)
}

/// `4 KiB`, `32 MiB`, `1.5 GiB`: a size for a table header.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit {
            return if bytes.is_multiple_of(unit) {
                format!("{} {name}", bytes / unit)
            } else {
                format!("{:.1} {name}", bytes as f64 / unit as f64)
            };
        }
    }
    format!("{bytes} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units_and_bad_ones_say_why() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4kib"), Ok(4096));
        assert_eq!(parse_size("32M"), Ok(32 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("K").unwrap_err().contains("not a size"));
        assert!(parse_size("4T").unwrap_err().contains("unknown unit `t`"));
        assert!(parse_size("99999999999999999999").is_err());
        assert!(
            parse_size("18446744073709551615G")
                .unwrap_err()
                .contains("64 bits")
        );
    }

    #[test]
    fn bench_sizes_hold_whole_elements_within_the_word_index() {
        assert_eq!(check_bench_size(8), Ok(8));
        assert!(check_bench_size(0).is_err());
        assert!(check_bench_size(12).unwrap_err().contains("whole number"));
        assert_eq!(check_bench_size(8 << 30), Ok(8 << 30));
        assert!(check_bench_size(16 << 30).unwrap_err().contains("32-bit"));
        assert!(DEFAULT_SIZES.iter().all(|&s| check_bench_size(s).is_ok()));
        assert!(DEFAULT_SIZES.contains(&(crate::generate::SEED_LEN as u64 * 8)));
    }

    #[test]
    fn human_bytes_picks_the_largest_whole_unit() {
        assert_eq!(human_bytes(4096), "4 KiB");
        assert_eq!(human_bytes(32 << 20), "32 MiB");
        assert_eq!(human_bytes(3 << 29), "1.5 GiB");
        assert_eq!(human_bytes(8), "8 B");
    }
}
