//! Opening a CUDA device when the host's CUDA libraries are loaded at run time.
//!
//! The `cuda` build names no CUDA library (vendor/README.md): cudarc opens them the
//! first time a device is asked for, and panics when one is missing. This checks for
//! each library candle needs first, so a host without them gets one line that says
//! which library and how to point at it, not a panic.

use anyhow::{anyhow, Result};
use candle_core::cuda_backend::cudarc;
use candle_core::Device;

/// A library candle opens with a device that cannot be loaded, as the file to look
/// for: the driver's, cuBLAS, cuBLASLt, cuRAND.
fn missing_library() -> Option<String> {
    let major = cuda_major();
    // SAFETY: each call only tries `dlopen` on the library's candidate names and
    // closes what it opened; no symbol is called.
    let present = unsafe {
        [
            (
                "libcuda.so.1".to_string(),
                cudarc::driver::sys::is_culib_present(),
            ),
            (
                format!("libcublas.so.{major}"),
                cudarc::cublas::sys::is_culib_present(),
            ),
            (
                format!("libcublasLt.so.{major}"),
                cudarc::cublaslt::sys::is_culib_present(),
            ),
            (
                "libcurand.so.10".to_string(),
                cudarc::curand::sys::is_culib_present(),
            ),
        ]
    };
    present
        .into_iter()
        .find(|(_, ok)| !ok)
        .map(|(name, _)| name)
}

/// The CUDA major version whose libraries this build looks for (`CUDARC_CUDA_VERSION`
/// at build time, `.cargo/config.toml`).
fn cuda_major() -> &'static str {
    option_env!("CUDARC_CUDA_VERSION")
        .and_then(|v| v.get(..v.len().saturating_sub(3)))
        .unwrap_or("13")
}

/// CUDA device `ordinal`, or an error that names what is missing.
pub fn open(ordinal: usize) -> Result<Device> {
    match missing_library().as_deref() {
        Some("libcuda.so.1") => {
            return Err(anyhow!(
                "cannot load libcuda.so.1, the NVIDIA driver's library: is a driver installed?"
            ))
        }
        Some(lib) => {
            return Err(anyhow!(
                "cannot load {lib}: put the directory holding it on LD_LIBRARY_PATH \
                 (a PyTorch install keeps it under site-packages/nvidia/*/lib)"
            ))
        }
        None => {}
    }
    // A library of another CUDA version can still lack a symbol cudarc asks for, which
    // cudarc reports by panicking: keep that an error too, without the panic's report.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let opened = std::panic::catch_unwind(|| Device::new_cuda(ordinal));
    std::panic::set_hook(hook);
    match opened {
        Ok(Ok(device)) => Ok(device),
        // candle appends a backtrace when RUST_BACKTRACE is set: the first line says it.
        Ok(Err(e)) => Err(anyhow!(
            "{}",
            e.to_string().lines().next().unwrap_or("unknown CUDA error")
        )),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic in cudarc");
            Err(anyhow!(
                "the host's CUDA libraries do not fit this build: {what}"
            ))
        }
    }
}
