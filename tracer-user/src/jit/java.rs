//! Java's compiled code and frame pointers. HotSpot's compiled code (C1, C2) saves its caller's
//! frame pointer but keeps none of its own unless the JVM runs with
//! `-XX:+PreserveFramePointer`: the register is then one more general register, left as the
//! nearest interpreted or native caller set it. A frame-pointer step from a compiled frame
//! lands on that caller's caller, skipping every compiled frame between and the caller
//! itself: a stack that looks whole and is wrong. In such a process a frame found by the
//! frame-pointer fallback from JIT code is not trusted: its stack ends at the JIT frame,
//! counted as `bad_frame_pointer` (`profile.rs`).
//!
//! Whether a process runs so is read from its executable's name (`java`) and the options it
//! was given: its command line and the variables the launcher reads options from. Every read
//! is bounded; an unreadable process is taken as keeping its frame pointers (today's walk).

/// The variables the Java launcher and the JVM read options from.
pub const OPTION_VARS: [&str; 3] = ["JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"];
/// The option that makes compiled code keep frame pointers.
pub const KEEP_FRAME_POINTERS: &str = "-XX:+PreserveFramePointer";

/// Whether one of `flags` was given in `args`, or inside the value of one of `vars` in `env`
/// (`NAME=value` words).
pub fn option_given(args: &[String], env: &[String], flags: &[&str], vars: &[&str]) -> bool {
    args.iter().any(|a| flags.iter().any(|f| a.starts_with(f)))
        || env.iter().any(|e| {
            vars.iter().any(|v| {
                e.strip_prefix(v)
                    .and_then(|e| e.strip_prefix('='))
                    .is_some_and(|value| flags.iter().any(|f| value.contains(f)))
            })
        })
}

/// Whether executable `exe_name` run with `args` and `env` is a JVM whose compiled code keeps
/// no frame pointers.
pub fn without_frame_pointers(exe_name: &str, args: &[String], env: &[String]) -> bool {
    exe_name == "java" && !option_given(args, env, &[KEEP_FRAME_POINTERS], &OPTION_VARS)
}

/// [`without_frame_pointers`] for process `pid`, read from `/proc` (false when unreadable).
pub fn process_without_frame_pointers(pid: u32) -> bool {
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return false;
    };
    if exe.file_name().is_none_or(|n| n != "java") {
        return false;
    }
    let (Some(args), Some(env)) = (words(pid, "cmdline"), words(pid, "environ")) else {
        return false;
    };
    without_frame_pointers("java", &args, &env)
}

/// The NUL-separated words of `/proc/PID/FILE` (its bounded start, `super::process::proc_file`).
pub fn words(pid: u32, file: &str) -> Option<Vec<String>> {
    Some(
        super::process::proc_file(pid, file)?
            .split(|&b| b == 0)
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    /// A JVM keeps frame pointers with the option on its command line or in a variable the
    /// launcher reads; another program, or another variable, says nothing of it.
    #[test]
    fn the_option_is_found_where_the_launcher_reads_it() {
        assert!(without_frame_pointers("java", &s(&["java", "-cp", ".", "Main"]), &[]));
        assert!(!without_frame_pointers(
            "java",
            &s(&["java", "-XX:+PreserveFramePointer", "Main"]),
            &[]
        ));
        for var in OPTION_VARS {
            let env = [format!("{var}=-Xmx1g -XX:+PreserveFramePointer")];
            assert!(!without_frame_pointers("java", &s(&["java", "Main"]), &env), "{var}");
        }
        let other = [String::from("OTHER=-XX:+PreserveFramePointer")];
        assert!(without_frame_pointers("java", &s(&["java", "Main"]), &other));
        assert!(!without_frame_pointers("node", &s(&["node", "app.js"]), &[]));
        // An argument of the program, after the class: still an option the command line has
        // (the safe side: the walk stays as it is).
        assert!(!without_frame_pointers(
            "java",
            &s(&["java", "Main", "-XX:+PreserveFramePointer"]),
            &[]
        ));
    }

    /// The tracer's own process is no JVM.
    #[test]
    fn a_process_that_is_not_java_keeps_its_walk() {
        assert!(!process_without_frame_pointers(std::process::id()));
        assert!(!process_without_frame_pointers(u32::MAX));
    }
}
