//! Opening: libamdhip64 through the locator's candidates, then each optional library from the
//! same install only, guarded against a second copy of HIP or HSA in the process.

use std::ffi::c_int;
use std::path::{Path, PathBuf};

use libloading::Library;

use crate::runtimes::hip::install;
use crate::runtimes::locate::{Attempt, hip_candidates, open_first};
use crate::runtimes::text::c_string;

use super::hip::{
    Abi, HIP_SYMBOLS, HipFns, HipVersion, SymbolState, hipError_t, hipErrorNotSupported,
    hipSuccess, symbol_state,
};
use super::table::Group;

/// The HIP runtime: where it was loaded from, its version and ABI, and every symbol.
pub struct Hip {
    pub fns: HipFns,
    /// The candidate that loaded (a soname or a path).
    pub candidate: String,
    /// The file actually mapped (/proc/self/maps), else the candidate.
    pub path: String,
    pub version: HipVersion,
    pub abi: Abi,
    /// The ROCm install this HIP came from: the directory of the candidate that loaded (a root's
    /// lib/, symlinks kept as the user named them), or of the mapped file when the loader's own
    /// search found it. Every other ROCm library is loaded from here and nowhere else.
    pub install_dir: PathBuf,
    _lib: Library,
}

impl std::fmt::Debug for Hip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hip")
            .field("path", &self.path)
            .field("version", &self.version)
            .field("abi", &self.abi)
            .finish()
    }
}

/// Why libamdhip64 could not be used.
#[derive(Debug, Clone)]
pub enum LoadError {
    /// No candidate loaded: each one and dlopen's reason.
    NotFound(Vec<Attempt>),
    /// It loaded but cannot be used (no hipRuntimeGetVersion, a version without bindings).
    Unusable { path: String, reason: String },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::NotFound(tried) => {
                let names: Vec<&str> = tried.iter().map(|a| a.candidate.as_str()).collect();
                write!(f, "libamdhip64 not found (tried {})", names.join(", "))
            }
            LoadError::Unusable { path, reason } => write!(f, "{path}: {reason}"),
        }
    }
}

/// The file the loader mapped whose name starts with `prefix` (`libamdhip64.so`): the first,
/// where a mixed install maps more than one.
pub fn mapped_file(prefix: &str) -> Option<String> {
    install::mapped_files(prefix).into_iter().next()
}

impl Hip {
    pub fn load(rocm_path: Option<&Path>) -> Result<Hip, LoadError> {
        let (lib, candidate) =
            open_first(&hip_candidates(rocm_path)).map_err(LoadError::NotFound)?;
        let fns = HipFns::resolve(&lib);
        let path = mapped_file("libamdhip64.so").unwrap_or_else(|| candidate.clone());
        let Some(get_version) = fns.hipRuntimeGetVersion else {
            return Err(LoadError::Unusable {
                path,
                reason: "lacks hipRuntimeGetVersion".into(),
            });
        };
        let mut raw: c_int = 0;
        // SAFETY: `hipError_t hipRuntimeGetVersion(int*)`; needs no device.
        let rc = unsafe { get_version(&mut raw) };
        if rc != hipSuccess {
            return Err(LoadError::Unusable {
                path,
                reason: format!("hipRuntimeGetVersion returned {rc}"),
            });
        }
        let version = HipVersion::decode(raw);
        let abi = version.abi().map_err(|reason| LoadError::Unusable {
            path: path.clone(),
            reason,
        })?;
        let install_dir = if candidate.contains('/') {
            Path::new(&candidate).parent().map(Path::to_path_buf)
        } else {
            Path::new(&path).parent().map(Path::to_path_buf)
        }
        .unwrap_or_default();
        Ok(Hip {
            fns,
            candidate,
            path,
            version,
            abi,
            install_dir,
            _lib: lib,
        })
    }

    /// Every expected symbol that did not resolve, with its group, in table order. Optional
    /// symbols and those a version never had are not "missing".
    pub fn missing(&self) -> Vec<(Group, &'static str)> {
        HIP_SYMBOLS
            .iter()
            .copied()
            .filter(|(_, n)| symbol_state(self.version, n, self.fns.has(n)) == SymbolState::Missing)
            .collect()
    }

    /// The optional symbols this version might have and this library does not export.
    pub fn optional_absent(&self) -> Vec<&'static str> {
        HIP_SYMBOLS
            .iter()
            .map(|(_, n)| *n)
            .filter(|n| {
                symbol_state(self.version, n, self.fns.has(n)) == SymbolState::OptionalAbsent
            })
            .collect()
    }

    /// The missing symbols of one group.
    pub fn missing_in(&self, group: Group) -> Vec<&'static str> {
        self.missing()
            .into_iter()
            .filter(|(g, _)| *g == group)
            .map(|(_, n)| n)
            .collect()
    }

    /// The error's name from hipGetErrorName, or `hipError <code>`.
    pub fn error_name(&self, rc: hipError_t) -> String {
        self.fns
            .hipGetErrorName
            .and_then(|f| {
                // SAFETY: returns a static NUL-terminated string (or null).
                unsafe { c_string(f(rc)) }
            })
            .unwrap_or_else(|| format!("hipError {rc}"))
    }

    /// hipGetDeviceCount: the count, or the code it returned.
    pub fn device_count(&self) -> Result<usize, hipError_t> {
        let f = self.fns.hipGetDeviceCount.ok_or(hipErrorNotSupported)?;
        let mut n: c_int = 0;
        // SAFETY: live out-parameter.
        let rc = unsafe { f(&mut n) };
        if rc == hipSuccess {
            Ok(n.max(0) as usize)
        } else {
            Err(rc)
        }
    }

    pub fn driver_version(&self) -> Option<i32> {
        let f = self.fns.hipDriverGetVersion?;
        let mut v: c_int = 0;
        // SAFETY: live out-parameter.
        (unsafe { f(&mut v) } == hipSuccess).then_some(v)
    }
}

/// An optional library (hiprtc, rocBLAS, rocSOLVER, HSA) opened with its table.
pub struct OptLib<T> {
    pub fns: T,
    pub path: String,
    pub missing: Vec<&'static str>,
    pub(super) _lib: Library,
}

/// `sonames` in the install of `hip`, nothing else: one ROCm install per process.
pub fn install_candidates(hip: &Hip, sonames: &[&str]) -> Vec<String> {
    sonames
        .iter()
        .map(|so| hip.install_dir.join(so).display().to_string())
        .collect()
}

/// Open the first of `candidates` that exists, guarded against a second libamdhip64 or
/// libhsa-runtime64 in this process: refused before loading when the library's dynamic section
/// says it would bring one ([`install::preflight`]), and dropped again when /proc/self/maps
/// shows one afterwards ([`install::mixed_now`]). A refusal reads `mixed ROCm install: ...`.
pub(super) fn open_opt<T>(
    candidates: &[String],
    what: &str,
    prefix: &str,
    list: &[(Group, &'static str)],
    resolve: fn(&Library) -> T,
    has: fn(&T, &str) -> bool,
) -> Result<OptLib<T>, String> {
    // Already mixed (an earlier library, or the application): nothing more is loaded.
    if let Some(mixed) = install::mixed_now() {
        return Err(mixed);
    }
    let mut tried = Vec::new();
    let mut opened = None;
    for c in candidates {
        let path = Path::new(c);
        if !path.exists() {
            tried.push(c.as_str());
            continue;
        }
        install::preflight(path)?;
        // SAFETY: loading a ROCm library runs its initialisers; that is the point.
        match unsafe { Library::new(path) } {
            Ok(lib) => {
                opened = Some((lib, c.clone()));
                break;
            }
            Err(e) => return Err(format!("{what}: {c}: {e}")),
        }
    }
    let Some((lib, candidate)) = opened else {
        return Err(format!("{what} not found (tried {})", tried.join(", ")));
    };
    if let Some(mixed) = install::mixed_now() {
        // Unload before anything in it is called; what stays mapped (a library marked
        // NODELETE) keeps every later open refused by the check above.
        drop(lib);
        return Err(format!("{mixed} after loading {candidate}"));
    }
    let fns = resolve(&lib);
    let missing = list
        .iter()
        .map(|(_, n)| *n)
        .filter(|n| !has(&fns, n))
        .collect();
    Ok(OptLib {
        fns,
        path: mapped_file(prefix).unwrap_or(candidate),
        missing,
        _lib: lib,
    })
}
