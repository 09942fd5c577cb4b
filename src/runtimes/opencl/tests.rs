use super::session::local_size;
use super::*;
use crate::model::CaseError;

#[test]
fn vendor_list_follows_the_environment() {
    let libs =
        |v: Vec<VendorLibrary>| -> Vec<String> { v.into_iter().map(|l| l.library).collect() };
    assert_eq!(
        libs(vendor_libraries_from(
            Some("/x/a.so::libb.so.2"),
            Some("/ignored"),
            None
        )),
        ["/x/a.so", "libb.so.2"]
    );
    let dir = std::env::temp_dir().join(format!("clhip-vendors-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("b.icd"), "libb.so\n").unwrap();
    std::fs::write(dir.join("a.icd"), "/opt/a/liba.so\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "libnot.so\n").unwrap();
    let d = dir.to_str().unwrap();
    assert_eq!(
        libs(vendor_libraries_from(None, Some(d), None)),
        ["/opt/a/liba.so", "libb.so"]
    );
    assert_eq!(
        libs(vendor_libraries_from(None, None, Some(d))),
        ["/opt/a/liba.so", "libb.so"]
    );
    assert_eq!(
        libs(vendor_libraries_from(None, Some("b.icd"), Some(d))),
        ["libb.so"]
    );
    assert_eq!(
        libs(vendor_libraries_from(None, Some("libc.so.1"), Some(d))),
        ["libc.so.1"]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn with_no_vendor_listed_the_reason_says_what_the_environment_holds() {
    let dir = std::env::temp_dir().join(format!("clhip-no-vendor-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let d = dir.to_str().unwrap();
    assert!(vendor_libraries_from(None, Some(d), None).is_empty());
    let reason = no_vendor_reason_from(None, Some(d), None);
    assert_eq!(
        reason,
        format!(
            "OCL_ICD_FILENAMES is not set; OCL_ICD_VENDORS is set to {d}, a directory with no .icd file"
        )
    );
    std::fs::write(dir.join("empty.icd"), "").unwrap();
    assert!(vendor_libraries_from(None, Some(d), None).is_empty());
    assert!(
        no_vendor_reason_from(None, Some(d), None)
            .ends_with("whose 1 .icd file names no library (unreadable or empty)")
    );
    assert!(
        no_vendor_reason_from(None, None, Some(d)).contains(&format!(
            "the vendor directory is OPENCL_VENDOR_PATH's {d}, whose 1"
        ))
    );
    let gone = dir.join("gone");
    let g = gone.to_str().unwrap();
    assert!(
        no_vendor_reason_from(None, None, Some(g))
            .ends_with(&format!("(OPENCL_VENDOR_PATH's {g}) does not exist"))
    );
    assert!(
        no_vendor_reason_from(None, Some("/nowhere/x.icd"), None)
            .contains("OCL_ICD_VENDORS is set to /nowhere/x.icd, an .icd file")
    );
    assert!(no_vendor_reason_from(Some(":"), None, None).contains("names no library"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn families_from_real_platform_names() {
    assert_eq!(family("Portable Computing Language"), "pocl");
    assert_eq!(family("NVIDIA CUDA"), "nvidia");
    assert_eq!(family("AMD Accelerated Parallel Processing"), "rocm");
    assert_eq!(family("rusticl"), "rusticl");
    assert_eq!(family("Intel(R) OpenCL Graphics"), "intel");
}

#[test]
fn local_size_respects_limits() {
    assert_eq!(local_size(1, 1024), 1);
    assert_eq!(local_size(3, 1024), 4);
    assert_eq!(local_size(1 << 22, 1024), 256);
    assert_eq!(local_size(1 << 22, 64), 64);
    assert_eq!(local_size(1000, 1), 1);
}

/// An import the device lists as importable and then refuses is its failure; one it does
/// not list, or whose list it would not give, stays a refusal.
#[test]
fn a_refused_import_fails_only_when_its_handle_type_is_listed() {
    const QUERY: &str = "CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR";
    const DMA_BUF: (&str, u32) = ("CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR", 0x2067);
    let refused = || cl_error("clCreateBufferWithProperties", -30);
    let what = "OpenCL would not import the peer's fd";
    match import_refusal(refused(), what, QUERY, DMA_BUF, Ok(vec![0x2060, 0x2067])) {
        CaseError::Broken(e) => assert_eq!(
            e.to_string(),
            "clCreateBufferWithProperties returned CL_INVALID_VALUE (-30): although \
             CL_DEVICE_EXTERNAL_MEMORY_IMPORT_HANDLE_TYPES_KHR lists \
             CL_EXTERNAL_MEMORY_HANDLE_DMA_BUF_KHR"
        ),
        other => panic!("{other:?}"),
    }
    match import_refusal(refused(), what, QUERY, DMA_BUF, Ok(vec![0x2060])) {
        CaseError::Unsupported { reason, error } => {
            assert!(
                reason.starts_with(what) && reason.contains("is not in its"),
                "{reason}"
            );
            assert_eq!(error, Some(refused()));
        }
        other => panic!("{other:?}"),
    }
    let unknown = Err(cl_error("clGetDeviceInfo", -30));
    assert!(matches!(
        import_refusal(refused(), what, QUERY, DMA_BUF, unknown),
        CaseError::Unsupported { .. }
    ));
    // A fault stays a fault, listed or not.
    let fault = cl_error("clCreateBufferWithProperties", -5);
    assert!(matches!(
        import_refusal(fault, what, QUERY, DMA_BUF, Ok(vec![0x2067])),
        CaseError::Fault(_)
    ));
}

#[test]
fn error_names_come_from_the_code_table() {
    let e = cl_error("clSVMAlloc", -30);
    assert_eq!(e.name, "CL_INVALID_VALUE");
    assert_eq!(e.to_string(), "clSVMAlloc returned CL_INVALID_VALUE (-30)");
}
