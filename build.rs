//! Compiles `kernels/*.cu` to PTX with nvcc when the `cuda` feature is on (for the
//! compute capability in `CUDA_COMPUTE_CAP`, default 80; PTX is JIT-compiled forward
//! to newer GPUs). Without the feature it does nothing.

use std::path::PathBuf;
use std::process::Command;

const KERNELS: &[&str] = &["signals"];

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
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
