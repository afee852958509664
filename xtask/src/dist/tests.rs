use super::{ARCHES, arch, deb, oci, version};

/// The version comes from the workspace manifest, as cargo reads it.
#[test]
fn version_is_the_workspace_version() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    assert_eq!(version(&root).expect("a version"), env!("CARGO_PKG_VERSION"));
}

/// Each architecture has its Debian name and a musl target; unknown names are refused.
#[test]
fn architectures_are_named_and_unknown_ones_refused() {
    assert_eq!(arch("aarch64").expect("aarch64").debian, "arm64");
    assert_eq!(arch("x86_64").expect("x86_64").triple, "x86_64-unknown-linux-musl");
    assert!(ARCHES.iter().all(|a| a.triple.ends_with("-linux-musl")));
    assert!(arch("riscv64").is_err());
}

/// The control file has the fields dpkg requires, no dependency (the binary is static), and a
/// description whose continuation lines are indented as deb-control(5) requires.
#[test]
fn control_file_is_well_formed() {
    let control = deb::control("1.2.3", arch("aarch64").expect("aarch64"), 9000);
    for field in [
        "Package: sframe-trace\n",
        "Version: 1.2.3\n",
        "Architecture: arm64\n",
        "Installed-Size: 9000\n",
    ] {
        assert!(control.contains(field), "no {field:?} in\n{control}");
    }
    assert!(control.contains("Maintainer: ") && control.contains("Description: "));
    assert!(
        !control.contains("Depends:"),
        "a static binary depends on nothing:\n{control}"
    );
    let after = control.split_once("Description: ").expect("a description").1;
    for line in after.lines().skip(1) {
        assert!(line.starts_with(' '), "continuation line not indented: {line:?}");
    }
}

/// The image's name is the one the README's `podman run` uses.
#[test]
fn image_reference_is_local_and_versioned() {
    assert_eq!(oci::reference("0.1.0"), "localhost/sframe-trace:0.1.0");
}
