//! Unit tests of `bpf::probes`; each test says what it proves.

use tracer_common::{event::MAP_PARKED, trace::SampleRecord};

use super::*;
use crate::bpf::PROGRAM;

/// Every entry program and walker the events can ask for is in the embedded object (the
/// eBPF side generates the entry programs by macro), with the program arrays and the parked
/// samples' map.
#[test]
fn object_has_every_event_program() {
    let object = aya_obj::Object::parse(PROGRAM).expect("the embedded eBPF object parses");
    let specs: Vec<String> = ["offcpu", "uprobe:/x:f", "tracepoint:a:b"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let events = EventSet::parse(&specs, None).expect("events");
    let all = PROG_KPROBES
        .iter()
        .chain(&PROG_UPROBES)
        .chain(&PROG_URETPROBES)
        .chain(&PROG_TRACEPOINTS)
        .copied()
        .chain(programs(&events));
    for program in all {
        assert!(object.programs.contains_key(program), "program {program} missing");
    }
    for array in [MAP_PROGS_PROBE, MAP_PROGS_TRACEPOINT, MAP_PROGS_SWITCH] {
        assert!(object.maps.contains_key(array), "map {array} missing");
    }
    let parked = object.maps.get(MAP_PARKED).expect("map PARKED");
    assert_eq!(
        (parked.key_size(), parked.value_size()),
        (4, size_of::<SampleRecord>() as u32)
    );
}
