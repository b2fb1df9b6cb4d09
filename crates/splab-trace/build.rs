//! Builds splab's Valgrind tool (valgrind/sp_tool.c) when Valgrind's tool headers and static
//! core libraries are installed (Debian: `apt-get install valgrind`), and embeds it in the crate
//! (`record` writes it out next to links to Valgrind's own files at run time).
//!
//! When they are missing, or the target is not x86_64 Linux, the crate still builds: `record`
//! then reports how to install Valgrind, or uses lackey when asked to. The compiler and linker
//! flags are the ones Valgrind's own tools use (valgrind/Makefile has the same, for builds by
//! hand). Set SPLAB_NO_VGTOOL=1 to skip the tool.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const INCLUDE_DIRS: &[&str] = &["/usr/include/valgrind", "/usr/local/include/valgrind"];
const LIB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/valgrind",
    "/usr/lib/valgrind",
    "/usr/libexec/valgrind",
    "/usr/local/lib/valgrind",
    "/usr/lib64/valgrind",
];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(splab_vgtool)");
    println!("cargo:rerun-if-changed=valgrind/sp_tool.c");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=SPLAB_NO_VGTOOL");
    println!("cargo:rerun-if-env-changed=CC");
    if env::var_os("SPLAB_NO_VGTOOL").is_some() {
        return;
    }
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if arch != "x86_64" || os != "linux" {
        return;
    }
    let Some(inc) = INCLUDE_DIRS
        .iter()
        .map(Path::new)
        .find(|d| d.join("pub_tool_basics.h").exists())
    else {
        println!("cargo:warning=splab-trace: Valgrind's tool headers are not installed (apt-get install valgrind): `splab record` will not have its fast tool");
        return;
    };
    let Some(lib) = LIB_DIRS
        .iter()
        .map(Path::new)
        .find(|d| d.join("libcoregrind-amd64-linux.a").exists())
    else {
        println!("cargo:warning=splab-trace: libcoregrind-amd64-linux.a not found (apt-get install valgrind): `splab record` will not have its fast tool");
        return;
    };
    for d in [inc, lib] {
        println!("cargo:rerun-if-changed={}", d.display());
    }
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("vgtool");
    let _ = std::fs::create_dir_all(&out);
    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let obj = out.join("sp_tool.o");
    let bin = out.join("splab-amd64-linux");
    let compile = Command::new(&cc)
        .args([
            "-m64",
            "-O2",
            "-g",
            "-fno-stack-protector",
            "-fno-builtin",
            "-fno-pie",
            "-fno-strict-aliasing",
        ])
        .args(["-Wall", "-Wno-unused-parameter"])
        .arg(format!("-I{}", inc.display()))
        .args([
            "-DVGA_amd64=1",
            "-DVGO_linux=1",
            "-DVGP_amd64_linux=1",
            "-DVGPV_amd64_linux_vanilla=1",
        ])
        .args(["-c", "-o"])
        .arg(&obj)
        .arg("valgrind/sp_tool.c")
        .status();
    if !matches!(compile, Ok(s) if s.success()) {
        println!("cargo:warning=splab-trace: compiling valgrind/sp_tool.c failed ({compile:?}): `splab record` will not have its fast tool");
        return;
    }
    let link = Command::new(&cc)
        .args([
            "-m64",
            "-static",
            "-nodefaultlibs",
            "-nostartfiles",
            "-u",
            "_start",
            "-Wl,--build-id=none",
        ])
        .args(["-Wl,-Ttext-segment=0x58000000", "-no-pie", "-o"])
        .arg(&bin)
        .arg(&obj)
        .arg("-Wl,--start-group")
        .arg(lib.join("libcoregrind-amd64-linux.a"))
        .arg(lib.join("libvex-amd64-linux.a"))
        .arg(lib.join("libgcc-sup-amd64-linux.a"))
        .args(["-lgcc", "-Wl,--end-group"])
        .status();
    if !matches!(link, Ok(s) if s.success()) {
        println!("cargo:warning=splab-trace: linking the Valgrind tool failed ({link:?}): `splab record` will not have its fast tool");
        return;
    }
    println!("cargo:rustc-cfg=splab_vgtool");
    println!("cargo:rustc-env=SPLAB_VGTOOL_BIN={}", bin.display());
}
