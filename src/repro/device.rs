//! What the cuda and hip reproducers share: the peer's template sections a case needs,
//! assembled the same way for either runtime. Each runtime's file says how its API is named.

use crate::model::Op;

use super::ReproCase;
use super::emit::{Body, Dialect, Target, section};

/// A device runtime as its template and its names give it.
pub(super) struct DeviceApi {
    /// The template (templates/cuda.c, templates/hip.c).
    pub template: &'static str,
    pub dialect: Dialect,
    /// `enum api` tags of the kernel compiler and the BLAS and solver libraries.
    pub rtc: &'static str,
    pub blas: &'static str,
    pub solver: &'static str,
    /// check()'s lines naming an error of each (empty where the library has no names).
    pub rtc_name: &'static str,
    pub blas_name: &'static str,
    pub solver_name: &'static str,
    /// Whether the solver works through the BLAS library's handle (rocSOLVER does).
    pub solver_uses_blas: bool,
    /// The name of the kernels' source string.
    pub source_name: &'static str,
}

/// The target around `b` for a peer of `api`: the includes, CHECK and peer functions it uses.
pub(super) fn target(api: &DeviceApi, case: &ReproCase, b: &Body) -> Target {
    let t = api.template;
    let kernels = !b.peer_kernels.is_empty();
    let blas = b.blas || (b.solver && api.solver_uses_blas);
    let mut includes = section(t, "includes").to_string();
    let mut tags = vec!["CL", api.dialect.tag];
    let mut names = String::new();
    for (used, include, tag, name) in [
        (kernels, "include_rtc", api.rtc, api.rtc_name),
        (b.blas, "include_blas", api.blas, api.blas_name),
        (b.solver, "include_solver", api.solver, api.solver_name),
    ] {
        if used {
            includes.push_str(section(t, include));
            if !tags.contains(&tag) {
                tags.push(tag);
                names.push_str(name);
            }
        }
    }
    let check = format!(
        "enum api {{ {} }};\n{}",
        tags.join(", "),
        section(t, "check").replace("    /*@@ more names @@*/\n", &names)
    );
    let (decl, alloc) = if b.scratch {
        (section(t, "scratch_decl"), section(t, "scratch_alloc"))
    } else {
        ("", "")
    };
    let mut peer = section(t, "peer")
        .replace("/*@@ scratch decl @@*/\n", decl)
        .replace("    /*@@ scratch @@*/\n", alloc);
    for (used, name) in [
        (b.event, "event"),
        (kernels, "kernels"),
        (case.op.checks_a_pattern(), "pattern"),
        (
            matches!(case.op, Op::Pipeline | Op::Placement),
            "elementwise",
        ),
        (blas, "blas"),
        (b.solver, "solver"),
        (b.common.contains(&"ipc"), "ipc"),
    ] {
        if used {
            peer.push_str(section(t, name));
        }
    }
    for name in super::interop::peer_sections(&b.common) {
        peer.push_str(section(t, name));
    }
    Target {
        includes,
        check,
        constants: format!("enum {{ PEER_ORDINAL = {} }};\n", case.peer.ordinal),
        peer,
        peer_source: Some(api.source_name),
    }
}
