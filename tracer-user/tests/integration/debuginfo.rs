//! Symbols of stripped programs from elsewhere: a debug file served by Debian's real
//! `debuginfod` on 127.0.0.1 names a stripped program's frames with file:line, once while
//! tracing (`DEBUGINFOD_URLS`; streamed json too, from a background fetch) and once through `sframe-trace symbolize` of a `--symbolize
//! none` pprof; the traced profile symbolized again off-host equals the on-host result stack
//! for stack. And debug files with zlib- or zstd-compressed sections, MiniDebugInfo
//! (`.gnu_debugdata`), and a debug file whose compressed section lies about its size (refused,
//! counted, frames left as object and offset). Privileged, like every tracing test.

use std::{
    collections::BTreeMap,
    io::{Read as _, Write as _},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use object::{Object as _, ObjectSection as _};
use prost::Message as _;
use sframe_trace::export::pprof::Profile;

use crate::support::{Running, SUMMARY_JSON, Summary, read_pprof, run, tracer_binary};

/// A loop in three functions; argument: how many rounds (each some tens of milliseconds).
const PROGRAM: &str = r#"
#include <stdlib.h>
__attribute__((noinline)) long leaf(long n) { long s = 0; for (long i = 0; i < n; i++) s += i * i % 7; return s; }
__attribute__((noinline)) long mid(long n) { return leaf(n) + 1; }
int main(int argc, char **argv) {
    long t = 0;
    for (int j = 0; j < (argc > 1 ? atoi(argv[1]) : 30); j++) t += mid(20000000);
    return (int)(t & 1);
}
"#;

/// A stripped program and its debug file (`prog.debug`), with a build-id of its own.
struct Built {
    stripped: PathBuf,
    debug: PathBuf,
    build_id: String,
}

fn build(dir: &Path, name: &str, tag: u8) -> Built {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, PROGRAM).expect("write the source");
    let unique = format!(
        "{:08x}{:08x}",
        std::process::id(),
        std::time::UNIX_EPOCH.elapsed().unwrap_or_default().subsec_nanos()
    );
    let build_id = format!("6d{tag:02x}{unique}00000000000000000000");
    let full = dir.join(format!("{name}.full"));
    run(Command::new("gcc")
        .args([
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-Wa,--gsframe",
        ])
        .arg(format!("-Wl,--build-id=0x{build_id}"))
        .arg("-o")
        .arg(&full)
        .arg(&src));
    let debug = dir.join(format!("{name}.debug"));
    run(Command::new("objcopy").arg("--only-keep-debug").arg(&full).arg(&debug));
    let stripped = dir.join(name);
    run(Command::new("objcopy").arg("--strip-all").arg(&full).arg(&stripped));
    Built {
        stripped,
        debug,
        build_id,
    }
}

/// Trace `program ARG` to its end with `args`; stderr.
fn trace(program: &Path, env: &[(&str, &Path)], args: &[&str]) -> String {
    let mut cmd = Command::new(tracer_binary());
    cmd.args(["--no-kernel", "-F", "499"]).args(SUMMARY_JSON).args(args);
    cmd.arg("--").arg(program).arg("12");
    cmd.env_remove("DEBUGINFOD_URLS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run sframe-trace");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "sframe-trace failed: {stderr}");
    stderr
}

fn symbolize(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(tracer_binary());
    cmd.arg("symbolize").args(args).env_remove("DEBUGINFOD_URLS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run sframe-trace symbolize");
    assert!(
        out.status.success(),
        "symbolize failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every (function, file, line) the profile's locations name.
fn named_lines(p: &Profile) -> Vec<(String, String, i64)> {
    let s = |i: i64| p.string_table[i as usize].clone();
    p.location
        .iter()
        .flat_map(|l| &l.line)
        .map(|line| {
            let f = p.function.iter().find(|f| f.id == line.function_id).expect("function");
            (s(f.name), s(f.filename), line.line)
        })
        .collect()
}

/// `leaf` and `mid` are named, from `file` with line numbers.
fn assert_named_with_lines(p: &Profile, file: &str, what: &str) {
    let lines = named_lines(p);
    for function in ["leaf", "mid", "main"] {
        assert!(
            lines
                .iter()
                .any(|(name, f, line)| name == function && f.ends_with(file) && *line > 0),
            "{what}: {function} not named from {file} with a line: {lines:?}"
        );
    }
}

/// The folded lines as a multiset (order aside).
fn folded(path: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(path).expect("read the folded output");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let (stack, count) = line.rsplit_once(' ').expect("STACK COUNT");
        *out.entry(stack.to_owned()).or_default() += count.parse::<u64>().expect("a count");
    }
    out
}

/// Debian's debuginfod serving the files of `dir` on a free port of 127.0.0.1.
struct Server {
    process: Running,
    url: String,
}

impl Server {
    fn start(dir: &Path, db: &Path) -> Server {
        // A port free now (the server binds it right after).
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new("debuginfod")
            .arg("-F")
            .arg(dir)
            .arg("-d")
            .arg(db)
            .args(["-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start debuginfod (the Debian package debuginfod; cargo xtask setup installs it)");
        Server {
            process: Running(child),
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Wait until the server has scanned `build_id` (it answers 200 for it): its own progress,
    /// polled; fails if the server exits.
    fn wait_for(&mut self, build_id: &str) {
        let port = self.url.rsplit(':').next().expect("port").to_owned();
        loop {
            if let Ok(Some(status)) = self.process.0.try_wait() {
                panic!("debuginfod exited: {status}");
            }
            if let Ok(mut conn) = TcpStream::connect(format!("127.0.0.1:{port}")) {
                let request = format!(
                    "GET /buildid/{build_id}/debuginfo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                );
                let mut head = [0u8; 12];
                if conn.write_all(request.as_bytes()).is_ok()
                    && conn.read_exact(&mut head).is_ok()
                    && head.ends_with(b"200")
                {
                    return;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

#[test]
fn debuginfod_names_stripped_frames_while_tracing_and_offline() {
    privileged_test!(shared);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let served = d.join("served");
    std::fs::create_dir(&served).expect("mkdir");
    let prog = build(d, "dbgd", 1);
    std::fs::copy(&prog.debug, served.join("dbgd.debug")).expect("copy the debug file");
    let mut server = Server::start(&served, &d.join("db.sqlite"));
    server.wait_for(&prog.build_id);
    let url = PathBuf::from(&server.url);

    // 1. While tracing, through DEBUGINFOD_URLS, into the client cache.
    let cache = d.join("cache");
    let on_folded = d.join("on.folded");
    let on_pprof = d.join("on.pb.gz");
    // A streamed format too: the debug file is fetched in the background when the object is
    // first seen, and the records after that are named from it.
    let on_json = d.join("on.json");
    let stderr = trace(
        &prog.stripped,
        &[("DEBUGINFOD_URLS", &url), ("XDG_CACHE_HOME", &cache)],
        &[
            "-f",
            "folded",
            "-o",
            on_folded.to_str().expect("path"),
            "-f",
            "pprof",
            "-o",
            on_pprof.to_str().expect("path"),
            "-f",
            "json",
            "-o",
            on_json.to_str().expect("path"),
        ],
    );
    let records = std::fs::read_to_string(&on_json).expect("read the json output");
    assert!(records.lines().count() > 10, "{records}");
    let streamed_named = records
        .lines()
        .filter(|r| r.contains("\"symbol\":\"leaf\"") && r.contains("dbgd.c"))
        .count();
    assert!(
        streamed_named * 2 > records.lines().count(),
        "{streamed_named} of {} streamed records name leaf from the fetched file",
        records.lines().count()
    );
    let summary = Summary::of(&stderr);
    assert_eq!(summary.count("symbols.fetched"), 1, "{stderr}");
    let cached = cache.join("debuginfod_client").join(&prog.build_id).join("debuginfo");
    assert_eq!(
        std::fs::read(&cached).expect("the debug file is in the client cache"),
        std::fs::read(&prog.debug).expect("read")
    );
    assert_named_with_lines(&read_pprof(&on_pprof), "dbgd.c", "traced with DEBUGINFOD_URLS");
    let on = folded(&on_folded);
    assert!(on.keys().any(|s| s.ends_with(";main;mid;leaf")), "{on:?}");

    // 2. --symbolize none, then `symbolize` elsewhere (a cache of its own: it fetches).
    let none = d.join("none.pb.gz");
    trace(
        &prog.stripped,
        &[],
        &["--symbolize", "none", "-f", "pprof", "-o", none.to_str().expect("path")],
    );
    let unnamed = read_pprof(&none);
    assert!(
        !named_lines(&unnamed).iter().any(|(name, ..)| name == "leaf"),
        "--symbolize none named frames"
    );
    assert!(unnamed.mapping.iter().all(|m| !m.has_functions));
    let build_ids: Vec<&str> = unnamed
        .mapping
        .iter()
        .map(|m| unnamed.string_table[m.build_id as usize].as_str())
        .collect();
    assert!(build_ids.contains(&prog.build_id.as_str()), "{build_ids:?}");
    let offline = d.join("offline.pb.gz");
    let other_cache = d.join("cache2");
    symbolize(
        &[
            none.to_str().expect("path"),
            "-o",
            offline.to_str().expect("path"),
            "--debuginfod",
            &server.url,
        ],
        &[("XDG_CACHE_HOME", &other_cache)],
    );
    assert_named_with_lines(&read_pprof(&offline), "dbgd.c", "symbolize of --symbolize none");

    // 3. The on-host profile with its user frames unnamed again, symbolized off-host: the
    //    same stacks as the on-host folded output.
    let mut stripped = read_pprof(&on_pprof);
    for l in &mut stripped.location {
        l.line.clear();
    }
    let stripped_path = d.join("stripped.pb");
    std::fs::write(&stripped_path, stripped.encode_to_vec()).expect("write");
    let again = d.join("again.folded");
    symbolize(
        &[
            stripped_path.to_str().expect("path"),
            "-f",
            "folded",
            "-o",
            again.to_str().expect("path"),
            "--offline",
        ],
        &[("XDG_CACHE_HOME", &cache)],
    );
    assert_eq!(folded(&again), on, "off-host stacks differ from the on-host ones");
}

/// Replace `name`'s `Elf64_Chdr.ch_size` in `file` by `size`.
fn lie_about_size(file: &Path, name: &str, size: u64) {
    let mut bytes = std::fs::read(file).expect("read");
    let range = object::File::parse(bytes.as_slice())
        .expect("ELF")
        .section_by_name(name)
        .expect("section")
        .compressed_file_range()
        .expect("range");
    assert_ne!(
        range.format,
        object::CompressionFormat::None,
        "{name} is not compressed"
    );
    let at = range.offset as usize - 24 + 8;
    bytes[at..at + 8].copy_from_slice(&size.to_le_bytes());
    std::fs::write(file, bytes).expect("write");
}

/// `prog`'s debug file, its sections compressed with `how`, under `debug_dir` by build-id.
fn place_debug_file(prog: &Built, debug_dir: &Path, how: &str) -> PathBuf {
    let id = &prog.build_id;
    let place = debug_dir.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..]));
    std::fs::create_dir_all(place.parent().expect("parent")).expect("mkdir");
    run(Command::new("objcopy")
        .arg(format!("--compress-debug-sections={how}"))
        .arg(&prog.debug)
        .arg(&place));
    place
}

#[test]
fn compressed_debug_files_and_minidebuginfo_name_frames() {
    privileged_test!(shared);
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let debug_dir = d.join("debug");
    // zlib and zstd debug files in --debug-dir, found by build-id.
    for (tag, how) in [(2u8, "zlib"), (3, "zstd")] {
        let prog = build(d, &format!("c{how}"), tag);
        place_debug_file(&prog, &debug_dir, how);
        let pprof = d.join(format!("{how}.pb.gz"));
        trace(
            &prog.stripped,
            &[],
            &[
                "--debug-dir",
                debug_dir.to_str().expect("path"),
                "-f",
                "pprof",
                "-o",
                pprof.to_str().expect("path"),
            ],
        );
        assert_named_with_lines(&read_pprof(&pprof), &format!("c{how}.c"), how);
    }
    // MiniDebugInfo as Fedora makes it: the function symbols of the debug file, xz-compressed,
    // in `.gnu_debugdata` of the stripped program.
    let prog = build(d, "mini", 4);
    let keep = d.join("keep");
    std::fs::write(&keep, "leaf\nmid\nmain\n").expect("write");
    let mini = d.join("mini_debuginfo");
    run(Command::new("objcopy")
        .args(["-S", "--remove-section", ".comment"])
        .arg(format!("--keep-symbols={}", keep.display()))
        .arg(&prog.debug)
        .arg(&mini));
    run(Command::new("xz").arg("-f").arg(&mini));
    let with_mini = d.join("mini-prog");
    run(Command::new("objcopy")
        .arg(format!("--add-section=.gnu_debugdata={}.xz", mini.display()))
        .arg(&prog.stripped)
        .arg(&with_mini));
    let folded_path = d.join("mini.folded");
    trace(
        &with_mini,
        &[],
        &["-f", "folded", "-o", folded_path.to_str().expect("path")],
    );
    let stacks = folded(&folded_path);
    assert!(
        stacks.keys().any(|s| s.ends_with(";main;mid;leaf")),
        "MiniDebugInfo: {stacks:?}"
    );
    // A debug file whose compressed .debug_info claims less than it holds: not read (its
    // frames stay object and offset), and counted.
    let prog = build(d, "lying", 5);
    let place = place_debug_file(&prog, &debug_dir, "zlib");
    lie_about_size(&place, ".debug_info", 64);
    let folded_path = d.join("lying.folded");
    let stderr = trace(
        &prog.stripped,
        &[],
        &[
            "--debug-dir",
            debug_dir.to_str().expect("path"),
            "-f",
            "folded",
            "-o",
            folded_path.to_str().expect("path"),
        ],
    );
    let summary = Summary::of(&stderr);
    assert_eq!(
        summary.count("symbols.refused_by_reason.compressed_section_size_lies"),
        1,
        "{stderr}"
    );
    let stacks = folded(&folded_path);
    assert!(
        !stacks.keys().any(|s| s.contains(";leaf")),
        "named from a refused file: {stacks:?}"
    );
    assert!(stacks.keys().any(|s| s.contains("[lying+0x")), "{stacks:?}");
}
