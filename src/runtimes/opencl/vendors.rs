//! Which OpenCL vendor libraries (ICDs) this environment lists, as either ICD loader reads the
//! environment, and the environment that makes a loader load one of them alone.

/// Where the loader looks for `.icd` files when neither `OCL_ICD_VENDORS` nor
/// `OPENCL_VENDOR_PATH` says otherwise.
pub const DEFAULT_VENDOR_DIR: &str = "/etc/OpenCL/vendors";

/// One OpenCL vendor library (an ICD) and where it was listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorLibrary {
    /// As written in `OCL_ICD_FILENAMES` or the `.icd` file: a path or a bare soname that
    /// `dlopen` resolves.
    pub library: String,
    /// `OCL_ICD_FILENAMES`, `OCL_ICD_VENDORS`, or the `.icd` file's path.
    pub listed_in: String,
}

/// The OpenCL vendor libraries of this environment, each to be loaded on its own (see
/// [`single_vendor_env`]): `OCL_ICD_FILENAMES` (colon-separated) when set and not empty; else
/// `OCL_ICD_VENDORS` (a directory of `.icd` files, one `.icd` file, or a library, as ocl-icd
/// reads it); else the `.icd` files of `OPENCL_VENDOR_PATH` or [`DEFAULT_VENDOR_DIR`].
///
/// `OCL_ICD_FILENAMES` replaces the directory here, where Khronos's loader would load both: it
/// is how a person picks vendors (ocl-icd ignores the variable), and a library listed twice,
/// once by path and once by soname, could not be told apart. `.icd` files are taken in name
/// order, so labels do not depend on directory order. Unreadable `.icd` files are skipped, as
/// both loaders skip them.
pub fn vendor_libraries() -> Vec<VendorLibrary> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    vendor_libraries_from(
        var("OCL_ICD_FILENAMES").as_deref(),
        var("OCL_ICD_VENDORS").as_deref(),
        var("OPENCL_VENDOR_PATH").as_deref(),
    )
}

/// [`vendor_libraries`] over given values of `OCL_ICD_FILENAMES`, `OCL_ICD_VENDORS` and
/// `OPENCL_VENDOR_PATH` (`None`: unset or empty).
pub fn vendor_libraries_from(
    filenames: Option<&str>,
    vendors: Option<&str>,
    vendor_path: Option<&str>,
) -> Vec<VendorLibrary> {
    use std::path::Path;
    if let Some(list) = filenames {
        return list
            .split(':')
            .filter(|l| !l.is_empty())
            .map(|l| VendorLibrary {
                library: l.to_string(),
                listed_in: "OCL_ICD_FILENAMES".into(),
            })
            .collect();
    }
    let vendor_dir = vendor_path.unwrap_or(DEFAULT_VENDOR_DIR);
    let Some(v) = vendors else {
        return icd_files_in(Path::new(vendor_dir));
    };
    let path = Path::new(v);
    if path.is_dir() {
        icd_files_in(path)
    } else if v.ends_with(".icd") {
        // ocl-icd: a bare `.icd` name is looked up in the vendor directory first.
        let in_dir = Path::new(vendor_dir).join(v);
        let file = if !v.contains('/') && in_dir.is_file() {
            in_dir
        } else {
            path.to_path_buf()
        };
        read_icd_file(&file).into_iter().collect()
    } else {
        vec![VendorLibrary {
            library: v.to_string(),
            listed_in: "OCL_ICD_VENDORS".into(),
        }]
    }
}

/// Why [`vendor_libraries`] lists nothing in this environment: what the variables hold and
/// where the loader was sent to look.
pub fn no_vendor_reason() -> String {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    no_vendor_reason_from(
        var("OCL_ICD_FILENAMES").as_deref(),
        var("OCL_ICD_VENDORS").as_deref(),
        var("OPENCL_VENDOR_PATH").as_deref(),
    )
}

/// [`no_vendor_reason`] over given values (`None`: unset or empty), for an environment where
/// [`vendor_libraries_from`] found nothing.
pub fn no_vendor_reason_from(
    filenames: Option<&str>,
    vendors: Option<&str>,
    vendor_path: Option<&str>,
) -> String {
    use std::path::Path;
    if let Some(list) = filenames {
        return format!("OCL_ICD_FILENAMES is set to `{list}`, which names no library");
    }
    // What a directory holds, when it holds no usable `.icd` file.
    let no_icd_in = |dir: &Path| -> String {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return format!("{}, which cannot be read", dir.display());
        };
        let icd = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "icd"))
            .count();
        match icd {
            0 => format!("{}, a directory with no .icd file", dir.display()),
            n => format!(
                "{}, whose {n} .icd {} no library (unreadable or empty)",
                dir.display(),
                if n == 1 { "file names" } else { "files name" }
            ),
        }
    };
    let dir = Path::new(vendor_path.unwrap_or(DEFAULT_VENDOR_DIR));
    let whose = if vendor_path.is_some() {
        "OPENCL_VENDOR_PATH's "
    } else {
        ""
    };
    match vendors {
        Some(v) if Path::new(v).is_dir() => format!(
            "OCL_ICD_FILENAMES is not set; OCL_ICD_VENDORS is set to {}",
            no_icd_in(Path::new(v))
        ),
        Some(v) => format!(
            "OCL_ICD_FILENAMES is not set; OCL_ICD_VENDORS is set to {v}, an .icd file that \
             cannot be read or names no library"
        ),
        None if !dir.is_dir() => format!(
            "OCL_ICD_FILENAMES and OCL_ICD_VENDORS are not set, and the vendor directory \
             ({whose}{}) does not exist",
            dir.display()
        ),
        None => format!(
            "OCL_ICD_FILENAMES and OCL_ICD_VENDORS are not set; the vendor directory is \
             {whose}{}",
            no_icd_in(dir)
        ),
    }
}

fn icd_files_in(dir: &std::path::Path) -> Vec<VendorLibrary> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<std::path::PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "icd"))
        .collect();
    files.sort();
    files.iter().filter_map(|f| read_icd_file(f)).collect()
}

/// The library an `.icd` file names: its first line, without the newline.
fn read_icd_file(file: &std::path::Path) -> Option<VendorLibrary> {
    let text = crate::input::read_text("an ICD file", file, crate::input::ICD_FILE_LIMIT).ok()?;
    let library = text.lines().next()?.trim();
    (!library.is_empty()).then(|| VendorLibrary {
        library: library.to_string(),
        listed_in: file.display().to_string(),
    })
}

/// The environment under which the ICD loader loads `library` and nothing else, with either
/// loader: Khronos's loads `OCL_ICD_FILENAMES` and reads `OCL_ICD_VENDORS` only as a
/// directory (a file is skipped); ocl-icd ignores `OCL_ICD_FILENAMES` and loads an
/// `OCL_ICD_VENDORS` that is neither a directory nor a `.icd` file as the one ICD library.
pub fn single_vendor_env(library: &str) -> Vec<(String, String)> {
    vec![
        ("OCL_ICD_FILENAMES".into(), library.into()),
        ("OCL_ICD_VENDORS".into(), library.into()),
    ]
}
