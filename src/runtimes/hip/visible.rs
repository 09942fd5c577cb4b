//! The HIP devices of a worker that sees only its pair's GPUs. HIP's init sets up every GPU it
//! sees (about 10 s on an 8-GPU node, under 1 s with `HIP_VISIBLE_DEVICES`:
//! legacy-rocm-build#4152), and a run starts a worker after every crash or fault: so the
//! runner gives each HIP worker `HIP_VISIBLE_DEVICES` naming its pair's GPU (both, for a pair
//! across GPUs), and the worker numbers them as HIP then does, 0, 1, ... in the list's order
//! (ROCm/clr `rocclr/device/rocm/rocdevice.cpp`, `Device::init`). The run's own ordinals, in
//! ids and results, stay the host's: [`RUN_ORDINALS_ENV`] lists which run ordinal each of the
//! worker's devices is, and [`local_ordinal`] maps one to the other.
//!
//! Not `ROCR_VISIBLE_DEVICES`: that hides GPUs from the HSA runtime, which ROCm's OpenCL in the
//! same worker shares, and so renumbers the OpenCL devices the worker finds its pair's device
//! among. `HIP_VISIBLE_DEVICES` is read by HIP's copy of rocclr alone (`amd::IS_HIP`); ROCm's
//! OpenCL reads `GPU_DEVICE_ORDINAL`.

use crate::model::CaseError;

/// Set by the runner beside `HIP_VISIBLE_DEVICES`: the run ordinal of each device the worker
/// sees, in HIP's order (`1,3`: the worker's HIP device 0 is the run's hip1, device 1 its hip3).
pub const RUN_ORDINALS_ENV: &str = "CLHIP_HIP_RUN_ORDINALS";

/// The HIP ordinal, in this process, of the device the run numbers `ordinal`: its place in
/// [`RUN_ORDINALS_ENV`] where the runner set it, else `ordinal` itself (the probe, and a worker
/// that sees every GPU).
pub fn local_ordinal(ordinal: usize) -> Result<usize, CaseError> {
    let list = std::env::var(RUN_ORDINALS_ENV).ok();
    local_ordinal_in(list.as_deref(), ordinal).map_err(CaseError::Harness)
}

/// [`local_ordinal`] with the list given: an ordinal missing from it, or a list that is no
/// list of ordinals, is the harness's own error, never a device the worker guesses at.
pub fn local_ordinal_in(list: Option<&str>, ordinal: usize) -> Result<usize, String> {
    let Some(list) = list.filter(|l| !l.trim().is_empty()) else {
        return Ok(ordinal);
    };
    let mut seen = Vec::new();
    for entry in list.split(',') {
        let run: usize = entry
            .trim()
            .parse()
            .map_err(|_| format!("{RUN_ORDINALS_ENV}={list}: `{entry}` is no device ordinal"))?;
        if seen.contains(&run) {
            return Err(format!(
                "{RUN_ORDINALS_ENV}={list}: hip{run} is listed twice"
            ));
        }
        seen.push(run);
    }
    seen.iter().position(|&run| run == ordinal).ok_or_else(|| {
        format!(
            "hip{ordinal} is not among the GPUs the runner made visible to this worker \
             ({RUN_ORDINALS_ENV}={list})"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_ordinal_is_its_place_among_the_visible_devices() {
        assert_eq!(local_ordinal_in(None, 3), Ok(3));
        assert_eq!(local_ordinal_in(Some(""), 3), Ok(3));
        assert_eq!(local_ordinal_in(Some("3"), 3), Ok(0));
        assert_eq!(local_ordinal_in(Some("1,3"), 1), Ok(0));
        assert_eq!(local_ordinal_in(Some("1,3"), 3), Ok(1));
        assert_eq!(local_ordinal_in(Some(" 5 , 2"), 2), Ok(1));
        assert_eq!(
            local_ordinal_in(Some("1,3"), 2),
            Err(
                "hip2 is not among the GPUs the runner made visible to this worker \
                 (CLHIP_HIP_RUN_ORDINALS=1,3)"
                    .into()
            )
        );
        assert!(
            local_ordinal_in(Some("1,x"), 1)
                .unwrap_err()
                .contains("`x`")
        );
        assert!(
            local_ordinal_in(Some("1,1"), 1)
                .unwrap_err()
                .contains("twice")
        );
    }
}
