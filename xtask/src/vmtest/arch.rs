//! The guest architectures of the kernel matrix: x86-64 guests run this machine's own binaries
//! on this machine's root file system; aarch64 guests boot Debian's arm64 kernels under
//! `qemu-system-aarch64` (software emulation) and run binaries cross-built here on an arm64
//! root file system unpacked from Debian packages (`rootfs.rs`, `crate::debian::root`). Pure: names and arguments.

/// The architecture of the guests (`--arch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GuestArch {
    #[value(name = "x86_64")]
    X86_64,
    Aarch64,
}

impl GuestArch {
    /// Debian's name of the architecture (packages, kernel flavours).
    pub fn debian(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "amd64",
            GuestArch::Aarch64 => "arm64",
        }
    }

    /// The name `--arch` and `cargo xtask dist` give it (`x86_64`, `aarch64`).
    pub fn dist_name(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86_64",
            GuestArch::Aarch64 => "aarch64",
        }
    }

    /// The qemu program and the Debian package it comes from.
    pub fn qemu(self) -> (&'static str, &'static str) {
        match self {
            GuestArch::X86_64 => ("qemu-system-x86_64", "qemu-system-x86"),
            GuestArch::Aarch64 => ("qemu-system-aarch64", "qemu-system-arm"),
        }
    }

    /// The serial console the kernel writes to.
    pub fn console(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "ttyS0",
            GuestArch::Aarch64 => "ttyAMA0",
        }
    }

    /// The Rust target the guest's binaries are built for, `None` for this machine's own.
    pub fn rust_target(self) -> Option<&'static str> {
        match self {
            GuestArch::X86_64 => None,
            GuestArch::Aarch64 => Some("aarch64-unknown-linux-gnu"),
        }
    }

    /// The machine and CPU arguments of qemu with accelerator `accel` (`kvm`: the host's CPU).
    /// aarch64: the `virt` board and the emulator's most capable CPU, pointer authentication
    /// included (with its cheaper implementation-defined algorithm under emulation).
    pub fn machine_args(self, accel: &str) -> Vec<String> {
        let (machine, cpu) = match (self, accel) {
            (GuestArch::X86_64, "kvm") => ("q35", "host"),
            (GuestArch::X86_64, _) => ("q35", "max"),
            (GuestArch::Aarch64, "kvm") => ("virt", "host"),
            (GuestArch::Aarch64, _) => ("virt", "max,pauth-impdef=on"),
        };
        ["-M", machine, "-accel", accel, "-cpu", cpu]
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    }
}
