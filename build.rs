//! Compiles `kernels/*.cu` to PTX with nvcc when the `cuda` feature is on (for the
//! compute capability in `CUDA_COMPUTE_CAP`, default 80; PTX is JIT-compiled forward
//! to newer GPUs). Without the feature it does nothing but name the assets the binary
//! carries (`SPECSCOPE_ASSETS_KEY`).

use std::path::PathBuf;
use std::process::Command;

const KERNELS: &[&str] = &["signals"];

/// The files the binary carries (src/cli/embedded.rs), by their folder under assets/.
const CARRIED: &[&str] = &["tiny-nld", "prompts", "demo.jsonl"];

/// A key of the carried assets' bytes (FNV-1a over each path and its contents): an
/// installed binary unpacks into a folder of that name, so binaries carrying different
/// assets never rewrite each other's copy.
fn assets_key() -> String {
    let mut files = Vec::new();
    for c in CARRIED {
        let p = PathBuf::from("assets").join(c);
        println!("cargo::rerun-if-changed={}", p.display());
        match std::fs::read_dir(&p) {
            Ok(dir) => files.extend(dir.flatten().map(|e| e.path()).filter(|p| p.is_file())),
            Err(_) => files.push(p),
        }
    }
    files.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_default();
        for b in f.to_string_lossy().bytes().chain(bytes) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!(
        "{}-{h:016x}",
        std::env::var("CARGO_PKG_VERSION").unwrap_or_default()
    )
}

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rustc-env=SPECSCOPE_ASSETS_KEY={}", assets_key());
    println!("cargo::rerun-if-env-changed=CUDA_COMPUTE_CAP");
    println!("cargo::rerun-if-env-changed=NVCC");
    println!("cargo::rerun-if-env-changed=NVCC_CCBIN");
    for k in KERNELS {
        println!("cargo::rerun-if-changed=kernels/{k}.cu");
    }
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "80".into());
    let cap: String = cap.chars().filter(char::is_ascii_digit).collect();
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    for k in KERNELS {
        let ptx = out.join(format!("{k}.ptx"));
        let mut cmd = Command::new(&nvcc);
        if let Ok(ccbin) = std::env::var("NVCC_CCBIN") {
            cmd.args(["-ccbin", &ccbin]); // the host compiler nvcc accepts
        }
        let status = cmd
            .args(["--ptx", "-O3", "-std=c++14"])
            .arg(format!("-arch=compute_{cap}"))
            .arg(format!("kernels/{k}.cu"))
            .arg("-o")
            .arg(&ptx)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("nvcc failed on kernels/{k}.cu ({s})"),
            Err(e) => panic!(
                "the cuda feature needs nvcc on PATH (or NVCC=...): {e}; scripts/install-nvcc.sh installs Debian's"
            ),
        }
    }
}
