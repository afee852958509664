//! The tasks that are sequences of commands: demo, test, clippy, fixtures.

use std::{path::Path, process::Command};

use anyhow::Context as _;

use crate::cmd::{cargo, sh};

/// The file the integration tests record skipped tests in (one line each), and the variable
/// that names it (read by tracer-user/tests/integration/support.rs).
const SKIPPED_FILE: &str = "target/skipped-tests";
const SKIPPED_VAR: &str = "SFRAME_TRACE_SKIPPED";

/// `cargo` for the tests: their crates linted as they are built (`cmd::linting_cargo`), the
/// privileged tier asked for, skipped tests recorded in [`SKIPPED_FILE`], the private roots of
/// the runtimes and sid's Go toolchains named.
fn cargo_test(root: &Path) -> anyhow::Result<Command> {
    let mut command = crate::cmd::linting_cargo();
    command.env(crate::cmd::PRIVILEGED_VAR, "1");
    command.env(SKIPPED_VAR, root.join(SKIPPED_FILE));
    command.env(crate::times::TIMES_VAR, root.join(crate::times::TIMES_FILE));
    command.env(crate::setup::python_root::VAR, crate::setup::python_root::path()?);
    command.env(
        crate::setup::python_root::SID_VAR,
        crate::setup::python_root::sid_path()?,
    );
    command.env(crate::setup::java_roots::VAR, crate::setup::java_roots::path()?);
    command.env(crate::setup::node_root::VAR, crate::setup::node_root::path()?);
    let go = std::env::join_paths(crate::setup::go_roots::paths()?)?;
    command.env(crate::setup::go_roots::VAR, go);
    Ok(command)
}

/// Say how many tests were skipped (not root, a tool or kernel feature missing), and which.
fn report_skipped(root: &Path) {
    let text = std::fs::read_to_string(root.join(SKIPPED_FILE)).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    if lines.is_empty() {
        println!("xtask: no test was skipped");
        return;
    }
    println!(
        "xtask: {} tests were SKIPPED (they did not run, they did not pass):",
        lines.len()
    );
    for line in lines {
        println!("  {line}");
    }
}

/// Build the release binary, compile the demo with SFrame, dump and check its table, and trace
/// it: the folded stacks go to target/demo/stacks.folded, the summary to the terminal.
pub fn demo(root: &Path) -> anyhow::Result<()> {
    sh(cargo().args(["build", "--release", "--package", "tracer-user"]))?;
    let out = root.join("target/demo");
    std::fs::create_dir_all(&out)?;
    let demo = out.join("demo");
    sh(Command::new("gcc")
        .args([
            "-O2",
            "-fomit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-Wa,--gsframe",
            "-o",
        ])
        .arg(&demo)
        .arg(root.join("demo/demo.c")))?;
    let tracer = root.join("target/release/sframe-trace");
    sh(Command::new(&tracer).arg("dump").arg(&demo))?;
    sh(Command::new(&tracer).arg("check").arg(&demo))?;
    let stacks = out.join("stacks.folded");
    sh(Command::new(&tracer)
        .args(["-F", "499", "-o"])
        .arg(&stacks)
        .arg("--")
        .arg(&demo)
        .arg("3"))?;
    let folded = std::fs::read_to_string(&stacks).with_context(|| format!("reading {}", stacks.display()))?;
    let mut lines: Vec<(u64, &str)> = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ').and_then(|(s, n)| Some((n.parse().ok()?, s))))
        .collect();
    lines.sort_unstable_by(|a, b| b.cmp(a));
    println!("\nhottest stacks of the demo ({}):", stacks.display());
    for (count, stack) in lines.iter().take(3) {
        println!("{count:>6}  {stack}");
    }
    Ok(())
}

/// Every test: the workspace's tests (privileged ones included; they refuse to skip under
/// CI=true; `long`: the long variants of the hardening tests), the packages and their tests,
/// under CI=true also guests of other kernels ([`background_lane`]), each fuzz target for a
/// bounded time, and both clippy passes.
pub fn test(root: &Path, long: bool, from: Option<&str>) -> anyhow::Result<()> {
    report_disk(root);
    let mut stages = crate::times::Stages::new(root, from)?;
    let result = test_stages(root, long, &mut stages);
    stages.report(root);
    report_skipped(root);
    result
}

/// The stages of [`test`], each timed; the first that fails ends the run, but for the guests
/// (under CI=true) and clippy, which run in the background from the packages' stage on and are
/// waited for at the end, their verdicts reported either way.
fn test_stages(root: &Path, long: bool, stages: &mut crate::times::Stages) -> anyhow::Result<()> {
    // binutils 2.44 (SFrame v2) and the sid snapshot (v3), and the aarch64 cross compiler: the
    // tracing tests build their workloads with every SFrame version.
    stages.run("toolchains", || {
        sh(Command::new("bash").arg(root.join("fixtures/toolchains.sh")))
    })?;
    let guests = std::env::var("CI").as_deref() == Ok("true");
    let _ = std::fs::remove_file(root.join(SKIPPED_FILE));
    // default-members: everything but the eBPF crate, which only builds for the bpf target.
    let workspace_tests = || -> anyhow::Result<Command> {
        let mut tests = cargo_test(root)?;
        if long {
            // Read by tracer-user/tests/integration/hardening.rs.
            tests.env("SFRAME_TRACE_HARDENING_LONG", "1");
        }
        tests.args(["test", "--no-fail-fast"]);
        Ok(tests)
    };
    // Built first; then, while they run, the later stages' programs are built in the
    // background (`warmup`), waited for before the next stage. [`TEST_THREADS`] test threads:
    // privileged tests with paired or shared turns run beside each other
    // (tracer-user/tests/integration/support/turns.rs); exclusive ones still run alone.
    let mut warmup = None;
    let workspace = stages.run("workspace-tests", || {
        sh(workspace_tests()?.arg("--no-run"))?;
        warmup = Some(crate::warmup::start(root, guests));
        sh(workspace_tests()?.args(["--", "--test-threads", TEST_THREADS]))
    });
    if let Some(warmup) = warmup {
        warmup.finish();
    }
    workspace?;
    // The packages first: the guests trace with the static executable.
    stages.run("dist", || dist(root))?;
    let lane = background_lane(root, guests, stages)?;
    let rest = later_stages(root, long, stages);
    let Some(lane) = lane else {
        return rest;
    };
    let mut failed = Vec::new();
    for ended in lane.finish() {
        stages.record(ended.name, ended.took, ended.ok);
        if !ended.ok {
            failed.push(ended.name);
        }
    }
    rest?;
    if !failed.is_empty() {
        anyhow::bail!("failed in the background: {}", failed.join(", "));
    }
    Ok(())
}

/// The stages after the packages, in the foreground.
fn later_stages(root: &Path, long: bool, stages: &mut crate::times::Stages) -> anyhow::Result<()> {
    // The pure readers (tracer-unwind) also build and pass alone, without the features the
    // rest of the workspace unifies into their dependencies, as fuzz/ builds them.
    stages.run("pure-readers", || {
        sh(cargo().args(["test", "--package", "tracer-unwind"]))
    })?;
    stages.run("conformance", || conformance(root))?;
    stages.run("external", || external(root, long))?;
    stages.run("dist-tests", || dist_tests(root))?;
    stages.run("fuzz", || crate::fuzz::fuzz(root, crate::fuzz::SECONDS))
}

/// The stages that run in the background (`background.rs`), each a child of this xtask:
/// under CI=true (`guests`) the oldest and the newest x86-64 kernels, then an arm64 one, each
/// a `vm-test` whose tests run the static executable of `dist` as their tracer (and test it
/// as such), from the debug build of the tests (their packages installed here first, one apt
/// at a time); then the formatting and clippy, in their own target directory (so
/// that its lock never holds up the other stages' cargo). None when all come before `--from`.
fn background_lane(
    root: &Path,
    guests: bool,
    stages: &crate::times::Stages,
) -> anyhow::Result<Option<crate::background::Lane>> {
    use crate::vmtest::{self, arch::GuestArch};
    let xtask = std::env::current_exe().context("this xtask's path")?;
    let mut jobs = Vec::new();
    let x86_tests: Vec<String> = vmtest::CI_TESTS_X86_64.iter().map(|t| (*t).to_owned()).collect();
    let mut arm64_tests = vmtest::ci_tests_aarch64();
    arm64_tests.push(vmtest::DIST_TESTS.to_owned());
    let guest_jobs = [
        ("x86-64-guests", GuestArch::X86_64, "bullseye,sid", x86_tests),
        ("arm64-guest", GuestArch::Aarch64, "bookworm", arm64_tests),
    ];
    for (name, arch, kernels, tests) in guest_jobs.into_iter().filter(|_| guests) {
        if stages.skipped(name) {
            continue;
        }
        vmtest::check_prerequisites(root, arch)?;
        let packages: Vec<&str> = vmtest::QEMU_PACKAGES.iter().copied().chain([arch.qemu().1]).collect();
        crate::setup::apt(&packages)?;
        let binary = crate::dist::staged_binary(root, arch.dist_name())?;
        let mut command = Command::new(&xtask);
        command
            .args(["vm-test", "--arch", arch.dist_name(), "--kernels", kernels])
            .arg("--tests")
            .arg(tests.join(","))
            .env("SFRAME_TRACE_DIST_BINARY", &binary)
            .env("SFRAME_TRACE_BIN", &binary);
        jobs.push(crate::background::Job { name, command });
    }
    if !stages.skipped("clippy") {
        // The userspace crates were linted as the tests were built (`cargo_test`).
        let mut command = Command::new(&xtask);
        command.args(["clippy", "--ebpf-only"]);
        jobs.push(crate::background::Job {
            name: "clippy",
            command,
        });
    }
    Ok((!jobs.is_empty()).then(|| crate::background::start(root, jobs)))
}

/// Threads of the test binaries in the workspace stage: enough for the turns privileged
/// tests may hold at once (tracer-user/tests/integration/support/turns.rs: two paired ones
/// beside shared ones, three of those at most).
const TEST_THREADS: &str = "4";

/// Disk a first run of the suite writes, in GiB, with room to spare: a clean clone under
/// CI=true took 7.4 (its builds, the binutils suites, the Python root), the kernels and the
/// arm64 root file system 0.8, the packages and toolchains the set-up installs about 2.
const SUITE_DISK_GIB: u64 = 12;

/// Say how much disk the suite has, and warn loudly when a first run would not fit: a build
/// that runs out of space fails with a message about a temporary file, far from the cause.
fn report_disk(root: &Path) {
    let Some(free) = crate::cmd::free_bytes(root) else {
        return;
    };
    let gib = free >> 30;
    println!("xtask: {gib} GiB free for {}", root.display());
    if gib < SUITE_DISK_GIB {
        println!(
            "xtask: WARNING: a first run of the suite writes about {SUITE_DISK_GIB} GiB (builds, toolchains, \
             kernels, guest root file systems); with {gib} GiB free it may fail with `No space left on device`"
        );
    }
}

/// The walker on a real program that is not in the repository: bash from Debian's source,
/// built without frame pointers and with SFrame, traced end to end and judged against its
/// disassembly; the forged-interpreter attacks, whose time bounds are the release build's; and
/// the CPython versions the suite traces with `--pid` only, launched and system-wide.
/// `long` (`cargo xtask test --long`): also CPython 3.6 to 3.10 launched and started
/// system-wide, a session per program and version (about 10 minutes; `--pid` runs them in the
/// suite).
pub fn external(root: &Path, long: bool) -> anyhow::Result<()> {
    let dir = root.join("target/external");
    sh(Command::new("bash")
        .arg(root.join("fixtures/external/build.sh"))
        .arg(&dir))?;
    // The tracer as users run it (the packages' static executable, on their architectures):
    // these tests also trace system-wide, where a debug build's output path would be the
    // bottleneck (and, for first_sample, its loading of new processes).
    let tracer = crate::dist::build::host_binary(root)?;
    let tests: Vec<&str> = [
        "external::bash_stacks_are_exact_in_every_format",
        "external::bash_plugin_stacks_are_exact_with_pid",
        "external::bash_plugin_stacks_are_exact_system_wide",
        "external::a_uprobe_on_bash_reports_its_true_callers",
        "first_sample::brief::new_processes_are_exact_from_their_first_sample",
        "first_sample::exits::samples_inside_exit_and_exec_carry_the_stack_of_the_call",
        "first_sample::exits::samples_inside_exit_and_exec_carry_the_stack_with_pid_and_launched",
        "first_sample::launchers::programs_started_through_launchers_are_exact_from_the_first_sample",
        // Forged interpreters: their time bounds hold for the build users run.
        "security::python::forged_line_tables_are_shared_and_bounded",
        "security::python::one_users_python_names_leave_room_for_others",
        "security::python::python_names_do_not_amplify_the_output",
        "security::python::idle_forged_interpreters_give_way_in_a_full_map",
        "security::python::a_users_busy_threads_do_not_delay_the_session",
        "security::python::forged_interpreter_structures_are_survived",
        // The end of a whole-host session, for the build users run.
        "first_minutes::whole_host::whole_host_session_names_writes_and_exits_after_its_end",
        // The CPython versions `--pid` alone covers in the suite, launched and system-wide.
        "python_session::python_session_system_wide_3_14_and_3_15",
        "python_session::python_session_launched_and_system_wide_3_11_and_3_12",
    ]
    .into_iter()
    .chain(
        [
            "python_session::python_session_launched_older",
            "python_session::python_session_system_wide_older",
        ]
        .into_iter()
        .filter(|_| long),
    )
    .collect();
    ignored_tests(
        root,
        &[("SFRAME_TRACE_EXTERNAL_DIR", &dir), ("SFRAME_TRACE_BIN", &tracer)],
        &tests,
    )?;
    Ok(())
}

/// What a production host installs (`cargo xtask dist`): the static executables, tarballs,
/// Debian packages and images, built (their builds done by the background builds), and the
/// packages their tests need installed.
pub fn dist(root: &Path) -> anyhow::Result<()> {
    crate::dist::dist(root, &crate::dist::ARCHES)?;
    crate::setup::apt(&["podman", "runc", "lintian", "file", "systemd"])
}

/// The packages of [`dist`], run as the README's Install section runs them: the static
/// executable in an empty root and in a Debian 11 root, the Debian package installed there,
/// the image under podman (tracer-user/tests/integration/dist.rs).
pub fn dist_tests(root: &Path) -> anyhow::Result<()> {
    let bullseye = crate::dist::bullseye::root()?;
    let dir = crate::dist::dir(root);
    ignored_tests(
        root,
        &[
            ("SFRAME_TRACE_DIST_DIR", &dir),
            ("SFRAME_TRACE_BULLSEYE_ROOT", &bullseye),
        ],
        &[
            "dist::static_binary_traces_from_an_empty_root",
            "dist::static_binary_traces_in_a_bullseye_root",
            "dist::deb_installs_in_a_clean_root_and_its_unit_verifies",
            "dist::image_traces_a_host_process_under_podman",
        ],
    )
}

/// Run `#[ignore]`d integration tests, each named exactly, with the environment they need
/// (corpus directories), in one run of the test binary (they take their turns there as in the
/// workspace stage, [`TEST_THREADS`] at a time); every one runs, and any failure fails this.
fn ignored_tests(root: &Path, env: &[(&str, &Path)], tests: &[&str]) -> anyhow::Result<()> {
    let command = || -> anyhow::Result<Command> {
        let mut command = cargo_test(root)?;
        for (var, path) in env {
            command.env(var, path);
        }
        command
            .args(["test", "--package", "tracer-user", "--test", "integration", "--"])
            .args(["--ignored", "--exact"]);
        Ok(command)
    };
    // A name that matches no test would pass unseen: each must be listed.
    let listed = command()?
        .args(["--list", "--format", "terse"])
        .args(tests)
        .output()
        .context("listing the integration tests")?;
    let listed = String::from_utf8_lossy(&listed.stdout);
    let missing = unlisted(tests, &listed);
    if !missing.is_empty() {
        anyhow::bail!("no such ignored tests: {}", missing.join(", "));
    }
    sh(command()?.args(["--test-threads", TEST_THREADS]).args(tests))
}

/// The names of `tests` that the test binary's `--list --format terse` output (`NAME: test`
/// lines) does not hold.
fn unlisted<'a>(tests: &[&'a str], listed: &str) -> Vec<&'a str> {
    tests
        .iter()
        .copied()
        .filter(|test| !listed.lines().any(|line| line.strip_suffix(": test") == Some(*test)))
        .collect()
}

/// Real C code that is not in the repository (lz4, from its PyPI sdist), built with binutils
/// 2.40, 2.44 and the sid snapshot for x86-64 and aarch64: `dump --json` must agree with each
/// toolchain's own readelf.
pub fn conformance(root: &Path) -> anyhow::Result<()> {
    let dir = root.join(crate::warmup::CONFORMANCE_DIR);
    sh(Command::new("bash").arg(root.join("fixtures/conformance.sh")).arg(&dir))?;
    ignored_tests(
        root,
        &[("SFRAME_TRACE_CONFORMANCE_DIR", &dir)],
        &["golden::conformance_corpus_matches_readelf"],
    )
}

/// Formatting, then clippy over the userspace crates (tracer-unwind, tracer-user, xtask; not
/// with `userspace` false: linted as they were built), then over the eBPF crate for its own
/// target.
pub fn clippy(userspace: bool) -> anyhow::Result<()> {
    sh(cargo().args(["fmt", "--all", "--check"]))?;
    if userspace {
        // default-members: the eBPF crate is linted below, for its own target.
        sh(cargo().args(["clippy", "--all-targets", "--", "-D", "warnings"]))?;
    }
    sh(cargo().env("RUSTC_BOOTSTRAP", "1").args([
        "clippy",
        "--package",
        "tracer-ebpf",
        "--release",
        "--target",
        "bpfel-unknown-none",
        "-Z",
        "build-std=core",
        "--target-dir",
        "target/ebpf-clippy",
        "--",
        "-D",
        "warnings",
    ]))
}

/// Regenerate the checked-in fixture corpus (fetches newer binutils into fixtures/.toolchains).
pub fn fixtures(root: &Path) -> anyhow::Result<()> {
    sh(Command::new("bash").arg(root.join("fixtures/build.sh")))
}

#[cfg(test)]
mod tests {
    /// A name the test binary does not list is reported; listed ones, exactly, are not.
    #[test]
    fn names_the_binary_does_not_list_are_reported() {
        let listed = "dist::a: test\ndist::ab: test\nnot a line\n";
        assert_eq!(
            super::unlisted(&["dist::a", "dist::b", "dist::a:"], listed),
            ["dist::b", "dist::a:"]
        );
        assert!(super::unlisted(&["dist::ab"], listed).is_empty());
    }
}
