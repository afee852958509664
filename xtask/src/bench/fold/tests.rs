//! Unit tests of `bench::fold`; each test says what it proves.

use super::*;

fn names(frames: &[&str]) -> Vec<String> {
    frames.iter().map(|f| (*f).to_owned()).collect()
}

/// Folded lines lose their command name and keep their counts.
#[test]
fn folded_lines() {
    let stacks = folded("plt;_start;main;spin 7\nplt;_start 1\n");
    assert_eq!(
        stacks,
        [(names(&["_start", "main", "spin"]), 7), (names(&["_start"]), 1)]
    );
}

/// perf script chains are reversed, offsets and kernel frames dropped, unknowns kept.
#[test]
fn perf_script_chains() {
    let text = "plt \n\
        \tffffffff81000000 asm_sysvec_apic_timer_interrupt+0x1a ([kernel.kallsyms])\n\
        \t            1147 spin (/w/plt)\n\
        \t            1105 lib_entry+0x5 (/w/libwork.so)\n\
        \t            1115 _start (/w/plt)\n\
        \n\
        plt \n\
        \t               0 [unknown] ([unknown])\n";
    assert_eq!(
        perf_script(text),
        [(names(&["_start", "lib_entry", "spin"]), 1), (names(&["[unknown]"]), 1)]
    );
}

/// bpftrace's printed map becomes stacks with their counts, offsets stripped.
#[test]
fn bpftrace_map() {
    let text = "Attaching 2 probes...\n\n\n@[\n    spin+59\n    0x55d1\n    _start+4\n]: 3\n@[\n    spin+42\n]: 40\n";
    assert_eq!(
        bpftrace(text),
        [(names(&["_start", "0x55d1", "spin"]), 3), (names(&["spin"]), 40)]
    );
}

/// Only the exact chain counts; the frame total weighs each stack by its samples.
#[test]
fn exact_and_frames() {
    let stacks = [(names(&["_start", "main"]), 9), (names(&["main"]), 1)];
    assert_eq!(exact(&stacks, &names(&["_start", "main"])), (10, 9));
    assert_eq!(frames(&stacks), (10, 19));
}
