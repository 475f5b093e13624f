//! Release builds lay out the functions that start-up and tracing run together, first in the code
//! (startup-order.ld, written by scripts/startup-order): the kernel maps a binary's code in 64 KiB at a time
//! around each page first run, so scattered over the whole binary they made 2.6 MiB of it resident, together
//! under 1 MiB. `STEADYTRACE_STARTUP_ORDER=0` builds without it (a linker that takes no linker script).

fn main() {
    println!("cargo:rerun-if-changed=startup-order.ld");
    println!("cargo:rerun-if-env-changed=STEADYTRACE_STARTUP_ORDER");
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux");
    let wanted = std::env::var("STEADYTRACE_STARTUP_ORDER").as_deref() != Ok("0");
    if release && linux && wanted {
        let script =
            std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("startup-order.ld");
        println!("cargo:rustc-link-arg-bin=steadytrace=-Wl,-T,{}", script.display());
    }
}
