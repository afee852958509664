//! Unit tests of the OTLP encoder (a hand-built profile, decoded back from the wire and read
//! through the dictionary), endpoint parsing, and the exporter's queue, retries and report
//! against a fake collector.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::{
    collector::profiles::v1development::ExportProfilesServiceRequest,
    common::v1::{KeyValue, any_value::Value},
    profiles::v1development::{KeyValueAndUnit, ProfilesDictionary},
};
use prost::Message as _;

use super::{
    Container, Destination, EndpointError, OtlpConfig, ProcessInfo, Protocol, ResourceInfo, encode,
    exporter::{Exporter, Retry},
    transport::{Accepted, SendError, Transport},
};
use crate::export::model::{FrameSource, ObjectInfo, Resolved, ResolvedFrame, ResolvedStack};

fn object(path: &str, build_id: Option<Vec<u8>>) -> ObjectInfo {
    ObjectInfo {
        path: path.to_owned(),
        name: path.rsplit('/').next().unwrap_or(path).to_owned(),
        build_id,
    }
}

fn frame(symbol: Option<&str>, object: Option<usize>, offset: u64) -> ResolvedFrame {
    ResolvedFrame {
        addr: offset.wrapping_add(0x5555_0000_0000),
        object,
        offset,
        symbol: symbol.map(str::to_owned),
        file: symbol.map(|_| "app.c".to_owned()),
        line: symbol.map(|_| 10),
        inlined: false,
        source: FrameSource::Sframe,
    }
}

fn stack(pid: u32, tid: u32, comm: &str, event: &str, frames: Vec<ResolvedFrame>, count: u64) -> ResolvedStack {
    ResolvedStack {
        pid,
        tid,
        comm: comm.to_owned(),
        event: event.to_owned(),
        frames,
        count,
        weight_ns: count * 1_000_000,
        truncated: None,
        cpu: None,
    }
}

/// `spin` (with `step` inlined into it) <- main <- _start in /app; one kernel frame above.
fn app_frames() -> Vec<ResolvedFrame> {
    let mut step = frame(Some("step"), Some(0), 0x1130);
    step.inlined = true;
    let mut kernel = frame(Some("do_syscall_64"), Some(2), 0xffff_ffff_8100_0000);
    kernel.source = FrameSource::Kernel;
    vec![
        kernel,
        step,
        frame(Some("spin"), Some(0), 0x1130),
        frame(Some("main"), Some(0), 0x1050),
        frame(Some("__libc_start_call_main"), Some(1), 0x2a1c9),
        frame(Some("_start"), Some(0), 0x1020),
    ]
}

fn sample_profile() -> Resolved {
    Resolved {
        objects: vec![
            object("/usr/bin/app", Some(vec![0xde, 0xad, 0xbe, 0xef, 0x01])),
            object("/lib/x86_64-linux-gnu/libc.so.6", None),
            object("[kernel.kallsyms]", None),
        ],
        stacks: vec![
            stack(100, 100, "app", "cpu-clock", app_frames(), 7),
            stack(100, 101, "worker", "cpu-clock", app_frames(), 3),
            stack(
                200,
                200,
                "other",
                "cpu-clock",
                vec![frame(None, Some(0), 0x1999), frame(None, None, 0x42)],
                2,
            ),
        ],
        start_unix_ns: 1_700_000_000_000_000_000,
        duration_ns: 10_000_000_000,
        period_ns: 10_101_010,
    }
}

const CONTAINER: &str = "4e1f6b2a9c3d5e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7";
const POD: &str = "0f2d7a9e-1b3c-4d5e-8f6a-7b8c9d0e1f2a";

fn resource() -> ResourceInfo {
    ResourceInfo {
        host_name: "host-1".to_owned(),
        host_id: Some("3d1219c7c4c5404aaa1f6d2a48adfda4".to_owned()),
        service_name: None,
        attributes: Vec::new(),
        processes: HashMap::from([(
            100,
            ProcessInfo {
                executable_name: "app".to_owned(),
                executable_path: Some("/usr/bin/app".to_owned()),
                container: Container {
                    id: Some(CONTAINER.to_owned()),
                    pod_uid: Some(POD.to_owned()),
                },
                runtime: None,
            },
        )]),
    }
}

/// Encode, then decode from the wire: what a collector would see.
fn round_trip(profile: &Resolved, resource: &ResourceInfo) -> ExportProfilesServiceRequest {
    let bytes = encode(profile, resource).encode_to_vec();
    ExportProfilesServiceRequest::decode(bytes.as_slice()).expect("decode the request")
}

/// The stack of a sample as function names per location (innermost first), `[]` for a location
/// without lines.
fn names(dict: &ProfilesDictionary, stack_index: i32) -> Vec<Vec<String>> {
    let stack = &dict.stack_table[stack_index as usize];
    stack
        .location_indices
        .iter()
        .map(|&l| {
            dict.location_table[l as usize]
                .lines
                .iter()
                .map(|line| {
                    let function = &dict.function_table[line.function_index as usize];
                    dict.string_table[function.name_strindex as usize].clone()
                })
                .collect()
        })
        .collect()
}

fn attributes(dict: &ProfilesDictionary, indices: &[i32]) -> HashMap<String, Value> {
    indices
        .iter()
        .map(|&i| {
            let KeyValueAndUnit {
                key_strindex, value, ..
            } = &dict.attribute_table[i as usize];
            (
                dict.string_table[*key_strindex as usize].clone(),
                value.clone().and_then(|v| v.value).expect("a value"),
            )
        })
        .collect()
}

fn resource_attributes(attributes: &[KeyValue]) -> HashMap<String, Value> {
    attributes
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().and_then(|v| v.value).expect("a value")))
        .collect()
}

fn text(s: &str) -> Value {
    Value::StringValue(s.to_owned())
}

/// Every dictionary table starts with its zero value, and strings are not repeated.
#[test]
fn dictionary_tables_start_with_zero_values_and_are_deduplicated() {
    let request = round_trip(&sample_profile(), &resource());
    let dict = request.dictionary.expect("a dictionary");
    assert_eq!(dict.string_table[0], "");
    assert_eq!(dict.mapping_table[0], Default::default());
    assert_eq!(dict.location_table[0], Default::default());
    assert_eq!(dict.function_table[0], Default::default());
    assert_eq!(dict.link_table[0], Default::default());
    assert_eq!(dict.attribute_table[0], Default::default());
    assert_eq!(dict.stack_table[0], Default::default());
    let mut strings = dict.string_table.clone();
    strings.sort();
    strings.dedup();
    assert_eq!(strings.len(), dict.string_table.len(), "duplicate strings");
    // The two threads of pid 100 share one stack; pid 200 has its own.
    assert_eq!(dict.stack_table.len(), 3);
}

/// Stacks read back through the dictionary give the model's frames, the inlined function first
/// in the location of the function it was inlined into, and a symbol-less frame a location
/// without lines in its object's mapping, at its object-relative address.
#[test]
fn stacks_resolve_through_the_dictionary() {
    let request = round_trip(&sample_profile(), &resource());
    let dict = request.dictionary.as_ref().expect("a dictionary");
    let app = &request.resource_profiles[0].scope_profiles[0].profiles[0];
    let stacks: Vec<_> = app.samples.iter().map(|s| names(dict, s.stack_index)).collect();
    let expected: Vec<Vec<String>> = [
        &["do_syscall_64"][..],
        &["step", "spin"],
        &["main"],
        &["__libc_start_call_main"],
        &["_start"],
    ]
    .iter()
    .map(|l| l.iter().map(|s| (*s).to_owned()).collect())
    .collect();
    assert_eq!(stacks, vec![expected.clone(), expected]);

    let other = &request.resource_profiles[1].scope_profiles[0].profiles[0];
    let stack = &dict.stack_table[other.samples[0].stack_index as usize];
    let unknown = &dict.location_table[stack.location_indices[0] as usize];
    assert!(unknown.lines.is_empty());
    assert_eq!(unknown.address, 0x1999);
    let mapping = &dict.mapping_table[unknown.mapping_index as usize];
    assert_eq!(dict.string_table[mapping.filename_strindex as usize], "/usr/bin/app");
    let anonymous = &dict.location_table[stack.location_indices[1] as usize];
    assert_eq!((anonymous.mapping_index, anonymous.address), (0, 0x5555_0000_0042));

    let kernel =
        &dict.location_table[dict.stack_table[app.samples[0].stack_index as usize].location_indices[0] as usize];
    assert_eq!(
        attributes(dict, &kernel.attribute_indices)["profile.frame.type"],
        text("kernel")
    );
}

/// Python frames are `cpython` frames whose lines name the function, its file and line, in
/// the `[python]` mapping; two lines of one function are two locations of one function.
#[test]
fn python_frames_are_cpython_frames() {
    let python = |line: u32| ResolvedFrame {
        addr: 3 << 32 | u64::from(line),
        object: Some(1),
        offset: 3 << 32 | u64::from(line),
        symbol: Some("Calc.step".to_owned()),
        file: Some("/srv/calc.py".to_owned()),
        line: Some(line),
        inlined: false,
        source: FrameSource::Python,
    };
    let profile = Resolved {
        objects: vec![object("/usr/bin/python3.11", None), object("[python]", None)],
        stacks: vec![
            stack(
                100,
                100,
                "python3",
                "cpu-clock",
                vec![python(12), frame(Some("main"), Some(0), 0x1050)],
                2,
            ),
            stack(
                100,
                100,
                "python3",
                "cpu-clock",
                vec![python(14), frame(Some("main"), Some(0), 0x1050)],
                1,
            ),
        ],
        ..sample_profile()
    };
    let request = round_trip(&profile, &resource());
    let dict = request.dictionary.as_ref().expect("a dictionary");
    let samples = &request.resource_profiles[0].scope_profiles[0].profiles[0].samples;
    let mut seen = Vec::new();
    for sample in samples {
        let top = dict.stack_table[sample.stack_index as usize].location_indices[0];
        let location = &dict.location_table[top as usize];
        assert_eq!(
            attributes(dict, &location.attribute_indices)["profile.frame.type"],
            text("cpython")
        );
        let mapping = &dict.mapping_table[location.mapping_index as usize];
        assert_eq!(dict.string_table[mapping.filename_strindex as usize], "[python]");
        let line = &location.lines[0];
        let function = &dict.function_table[line.function_index as usize];
        seen.push((
            dict.string_table[function.name_strindex as usize].clone(),
            dict.string_table[function.filename_strindex as usize].clone(),
            line.line,
            line.function_index,
        ));
    }
    seen.sort();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        (seen[0].0.as_str(), seen[0].1.as_str(), seen[0].2),
        ("Calc.step", "/srv/calc.py", 12)
    );
    assert_eq!(seen[1].2, 14);
    assert_eq!(seen[0].3, seen[1].3, "one function");
}

/// Mappings carry the object's path and GNU build-id (hex) as `process.executable.build_id.gnu`;
/// objects without one carry no attribute.
#[test]
fn mappings_carry_build_ids() {
    let request = round_trip(&sample_profile(), &resource());
    let dict = request.dictionary.expect("a dictionary");
    let by_path: HashMap<_, _> = dict.mapping_table[1..]
        .iter()
        .map(|m| (dict.string_table[m.filename_strindex as usize].clone(), m))
        .collect();
    assert_eq!(
        attributes(&dict, &by_path["/usr/bin/app"].attribute_indices)["process.executable.build_id.gnu"],
        text("deadbeef01")
    );
    assert!(by_path["/lib/x86_64-linux-gnu/libc.so.6"].attribute_indices.is_empty());
    assert!(by_path.contains_key("[kernel.kallsyms]"));
}

/// One resource per process with host (name, id, arch, OS), service, pid, executable and
/// container; a process whose executable was never read is named after its main thread (and has
/// no container); `--service-name` overrides the executable.
#[test]
fn resources_describe_each_process() {
    let request = round_trip(&sample_profile(), &resource());
    let resources: Vec<_> = request
        .resource_profiles
        .iter()
        .map(|r| resource_attributes(&r.resource.as_ref().expect("a resource").attributes))
        .collect();
    assert_eq!(resources.len(), 2);
    assert_eq!(resources[0]["host.name"], text("host-1"));
    assert_eq!(resources[0]["service.name"], text("app"));
    assert_eq!(resources[0]["process.pid"], Value::IntValue(100));
    assert_eq!(resources[0]["process.executable.name"], text("app"));
    assert_eq!(resources[0]["process.executable.path"], text("/usr/bin/app"));
    assert_eq!(resources[0]["container.id"], text(CONTAINER));
    assert_eq!(resources[0]["k8s.pod.uid"], text(POD));
    assert_eq!(resources[1]["process.pid"], Value::IntValue(200));
    assert_eq!(resources[1]["process.executable.name"], text("other"));
    assert!(!resources[1].contains_key("process.executable.path"));
    assert!(!resources[1].contains_key("container.id"));
    for r in &resources {
        assert_eq!(r["host.id"], text("3d1219c7c4c5404aaa1f6d2a48adfda4"));
        assert_eq!(r["os.type"], text("linux"));
        let arch = if cfg!(target_arch = "x86_64") { "amd64" } else { "arm64" };
        assert_eq!(r["host.arch"], text(arch));
    }

    let mut named = resource();
    named.service_name = Some("checkout".to_owned());
    let request = round_trip(&sample_profile(), &named);
    for r in &request.resource_profiles {
        let attributes = resource_attributes(&r.resource.as_ref().expect("a resource").attributes);
        assert_eq!(attributes["service.name"], text("checkout"));
    }
}

/// `OTEL_RESOURCE_ATTRIBUTES` land on every resource, but never in place of what sframe-trace
/// read of the process (a configured `process.pid` does not relabel a process).
#[test]
fn configured_attributes_join_every_resource() {
    let mut configured = resource();
    configured.attributes = vec![
        ("deployment.environment.name".to_owned(), "prod".to_owned()),
        ("process.pid".to_owned(), "1".to_owned()),
    ];
    let request = round_trip(&sample_profile(), &configured);
    assert_eq!(request.resource_profiles.len(), 2);
    for r in &request.resource_profiles {
        let attributes = resource_attributes(&r.resource.as_ref().expect("a resource").attributes);
        assert_eq!(attributes["deployment.environment.name"], text("prod"));
        assert_ne!(attributes["process.pid"], Value::IntValue(1));
        assert_ne!(attributes["process.pid"], text("1"));
    }
}

/// cpu-clock profiles count samples with the sampling period, per thread (`thread.id`,
/// `thread.name`), over the collection's time window.
#[test]
fn samples_count_per_thread_with_the_period() {
    let request = round_trip(&sample_profile(), &resource());
    let dict = request.dictionary.as_ref().expect("a dictionary");
    let profile = &request.resource_profiles[0].scope_profiles[0].profiles[0];
    let string = |i: i32| dict.string_table[i as usize].as_str();
    let sample_type = profile.sample_type.expect("a sample type");
    assert_eq!(
        (string(sample_type.type_strindex), string(sample_type.unit_strindex)),
        ("samples", "count")
    );
    let period_type = profile.period_type.expect("a period type");
    assert_eq!(
        (string(period_type.type_strindex), string(period_type.unit_strindex)),
        ("cpu", "nanoseconds")
    );
    assert_eq!(profile.period, 10_101_010);
    assert_eq!(profile.time_unix_nano, 1_700_000_000_000_000_000);
    assert_eq!(profile.duration_nano, 10_000_000_000);
    assert_eq!(
        attributes(dict, &profile.attribute_indices)["sframe_trace.event"],
        text("cpu-clock")
    );
    let threads: Vec<_> = profile
        .samples
        .iter()
        .map(|s| {
            let a = attributes(dict, &s.attribute_indices);
            (a["thread.id"].clone(), a["thread.name"].clone(), s.values.clone())
        })
        .collect();
    assert_eq!(
        threads,
        vec![
            (Value::IntValue(100), text("app"), vec![7]),
            (Value::IntValue(101), text("worker"), vec![3]),
        ]
    );
}

/// Stacks that only differ in what OTLP does not keep (here: the absolute address of frames in
/// an object) become one sample with the summed value; off-CPU samples weigh their time.
#[test]
fn identical_samples_merge_and_offcpu_weighs_time() {
    let mut moved = app_frames();
    for f in &mut moved {
        f.addr += 0x1000;
    }
    let profile = Resolved {
        objects: sample_profile().objects,
        stacks: vec![
            stack(100, 100, "app", "cpu-clock", app_frames(), 7),
            stack(100, 100, "app", "cpu-clock", moved, 5),
            stack(100, 100, "app", "offcpu", app_frames(), 2),
        ],
        ..sample_profile()
    };
    let request = round_trip(&profile, &resource());
    let dict = request.dictionary.as_ref().expect("a dictionary");
    let profiles = &request.resource_profiles[0].scope_profiles[0].profiles;
    assert_eq!(profiles.len(), 2, "one profile per event");
    assert_eq!(profiles[0].samples.len(), 1);
    assert_eq!(profiles[0].samples[0].values, vec![12]);
    let offcpu = &profiles[1];
    let sample_type = offcpu.sample_type.expect("a sample type");
    assert_eq!(dict.string_table[sample_type.type_strindex as usize], "off_cpu");
    assert_eq!(offcpu.samples[0].values, vec![2_000_000]);
    assert_eq!(offcpu.period_type, None);
}

mod container;
mod exporter;
mod runtime;
mod settings;
mod tls;
