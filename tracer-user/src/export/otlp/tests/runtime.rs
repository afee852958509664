//! `process.runtime.*` on the resource of a process whose runtime the session detected (and
//! only then), and `cpu.logical_number` on the samples of stacks kept per CPU.

use std::collections::{BTreeSet, HashMap};

use opentelemetry_proto::tonic::common::v1::any_value::Value;

use super::{attributes, resource, resource_attributes, round_trip, sample_profile, text};
use crate::export::otlp::{ProcessInfo, ResourceInfo, Runtime};

fn cpython() -> Runtime {
    Runtime {
        name: "cpython",
        version: Some("3.12.4".to_owned()),
        description: "CPython 3.12.4 (version read from the interpreter's Py_Version)".to_owned(),
    }
}

/// A process with a detected runtime carries its name, version and description; one without
/// (pid 200 here, unknown to the resource) carries none of them.
#[test]
fn detected_runtimes_become_resource_attributes() {
    let mut resource = resource();
    resource.processes.get_mut(&100).expect("pid 100").runtime = Some(cpython());
    let request = round_trip(&sample_profile(), &resource);
    let app = resource_attributes(
        &request.resource_profiles[0]
            .resource
            .as_ref()
            .expect("a resource")
            .attributes,
    );
    assert_eq!(app["process.runtime.name"], text("cpython"));
    assert_eq!(app["process.runtime.version"], text("3.12.4"));
    assert_eq!(
        app["process.runtime.description"],
        text("CPython 3.12.4 (version read from the interpreter's Py_Version)")
    );
    let other = resource_attributes(
        &request.resource_profiles[1]
            .resource
            .as_ref()
            .expect("a resource")
            .attributes,
    );
    assert!(!other.keys().any(|k| k.starts_with("process.runtime.")), "{other:?}");
}

/// Only `node`/`nodejs` executables are named by their executable name, without a version and
/// saying so; `java` and anything else give nothing (no guess).
#[test]
fn only_node_is_named_by_its_executable() {
    let node = Runtime::by_executable_name("node").expect("node");
    assert_eq!((node.name, node.version.as_deref()), ("nodejs", None));
    assert!(
        node.description.contains("executable name `node`"),
        "{}",
        node.description
    );
    for name in ["java", "python3", "nodes", "node.exe", ""] {
        assert_eq!(Runtime::by_executable_name(name), None, "{name}");
    }
}

/// A refresh gives a live process the runtime the session detected, or none (a pid reused by
/// a process without one loses the old one); a process gone keeps the one it had.
#[test]
fn refresh_takes_the_sessions_runtimes() {
    let me = std::process::id();
    let gone = u32::MAX - 1;
    let mut resource = ResourceInfo::default();
    let pids: BTreeSet<u32> = [me, gone].into();
    resource.refresh(&pids, &HashMap::from([(me, cpython()), (gone, cpython())]));
    assert_eq!(resource.processes[&me].runtime, Some(cpython()));
    assert!(
        !resource.processes.contains_key(&gone),
        "never read: nothing to attach to"
    );
    resource.processes.insert(
        gone,
        ProcessInfo {
            executable_name: "python3".to_owned(),
            executable_path: None,
            container: Default::default(),
            runtime: Some(cpython()),
        },
    );
    resource.refresh(&pids, &HashMap::new());
    assert_eq!(resource.processes[&me].runtime, None, "the live process is read again");
    assert_eq!(
        resource.processes[&gone].runtime,
        Some(cpython()),
        "kept for its last samples"
    );
}

/// Stacks kept per CPU become samples with `cpu.logical_number`; the same stack on two CPUs
/// is two samples, and stacks without a CPU carry no such attribute.
#[test]
fn samples_carry_their_cpu() {
    let mut profile = sample_profile();
    profile.stacks[0].cpu = Some(1);
    let mut again = profile.stacks[0].clone();
    again.cpu = Some(0);
    again.count = 4;
    profile.stacks.insert(1, again);
    let request = round_trip(&profile, &resource());
    let dict = request.dictionary.as_ref().expect("a dictionary");
    let app = &request.resource_profiles[0].scope_profiles[0].profiles[0];
    let mut seen: Vec<(i64, Option<i64>, i64)> = app
        .samples
        .iter()
        .map(|s| {
            let a = attributes(dict, &s.attribute_indices);
            let int = |key: &str| match a.get(key) {
                Some(Value::IntValue(n)) => Some(*n),
                None => None,
                other => panic!("{key}: {other:?}"),
            };
            (
                int("thread.id").expect("a thread"),
                int("cpu.logical_number"),
                s.values[0],
            )
        })
        .collect();
    seen.sort();
    assert_eq!(seen, [(100, Some(0), 4), (100, Some(1), 7), (101, None, 3)]);
}
