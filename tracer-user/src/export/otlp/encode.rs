//! [`Resolved`] to an `ExportProfilesServiceRequest`: one `ResourceProfiles` per process (host,
//! service, pid, executable and detected runtime as resource attributes), one `Profile` per event in it, and one
//! dictionary shared by all of them. Pure: no I/O, the same input gives the same bytes.
//!
//! The layout, per `profiles.proto` (v1development, opentelemetry-proto 1.10):
//! 1. Every table of the dictionary starts with its zero value (`""`, `Mapping{}`, ...), so an
//!    index of 0 means "not set"; entries are deduplicated by value.
//! 2. A frame becomes a `Location` in the mapping of its object, at its object-relative address,
//!    with one `Line` per function: the inlined ones first, the function they were inlined into
//!    last (the model's order). A frame without a symbol gets a location without lines, which a
//!    backend can still symbolize from the mapping's build-id and the address.
//! 3. Mappings carry the object's path and its GNU build-id as `process.executable.build_id.gnu`
//!    (lower-case hex). Their address range is left unset: one mapping serves every process,
//!    and addresses are relative to the object.
//! 4. A sample is a stack with `thread.id`, `thread.name` and, when known, `cpu.logical_number`
//!    (the CPU it was taken on) attributes and one value: the count, or for `offcpu` the time
//!    blocked in nanoseconds. The profile names its event in a
//!    `sframe_trace.event` attribute (`cpu-clock`, `offcpu`, `uprobe:...`).

use std::collections::{BTreeMap, HashMap};

use opentelemetry_proto::tonic::{
    collector::profiles::v1development::ExportProfilesServiceRequest,
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value::Value},
    profiles::v1development::{
        Function, KeyValueAndUnit, Line, Location, Mapping, Profile, ProfilesDictionary, ResourceProfiles, Sample,
        ScopeProfiles, Stack, ValueType,
    },
    resource::v1::Resource,
};

use super::{container::host_arch, resource::ResourceInfo};
use crate::export::model::{FrameSource, ObjectInfo, Resolved, ResolvedFrame, ResolvedStack};

/// The request carrying `profile`: one resource per process, one profile per event.
pub fn encode(profile: &Resolved, resource: &ResourceInfo) -> ExportProfilesServiceRequest {
    let mut by_process: BTreeMap<u32, BTreeMap<&str, Vec<&ResolvedStack>>> = BTreeMap::new();
    for stack in &profile.stacks {
        by_process
            .entry(stack.pid)
            .or_default()
            .entry(&stack.event)
            .or_default()
            .push(stack);
    }
    let mut dictionary = Dictionary::new(&profile.objects);
    let resource_profiles = by_process
        .iter()
        .map(|(&pid, events)| ResourceProfiles {
            resource: Some(process_resource(pid, events, resource)),
            scope_profiles: vec![ScopeProfiles {
                scope: Some(InstrumentationScope {
                    name: "sframe-trace".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..Default::default()
                }),
                profiles: events
                    .iter()
                    .map(|(event, stacks)| event_profile(event, stacks, profile, &mut dictionary))
                    .collect(),
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        })
        .collect();
    ExportProfilesServiceRequest {
        resource_profiles,
        dictionary: Some(dictionary.table),
    }
}

/// The resource of one process: host, service, pid and executable.
fn process_resource(pid: u32, events: &BTreeMap<&str, Vec<&ResolvedStack>>, resource: &ResourceInfo) -> Resource {
    let stacks = || events.values().flatten();
    let (executable, path, container, runtime) = match resource.processes.get(&pid) {
        Some(info) => (
            info.executable_name.clone(),
            info.executable_path.clone(),
            info.container.clone(),
            info.runtime.clone(),
        ),
        // Gone before it could be looked up: the main thread's command name is the executable's
        // (truncated to 15 bytes by the kernel).
        None => {
            let main = stacks().find(|s| s.tid == pid).or_else(|| stacks().next());
            (
                main.map(|s| s.comm.clone()).unwrap_or_default(),
                None,
                Default::default(),
                None,
            )
        }
    };
    let mut attributes = Vec::new();
    if !resource.host_name.is_empty() {
        attributes.push(key_value("host.name", Value::StringValue(resource.host_name.clone())));
    }
    if let Some(id) = &resource.host_id {
        attributes.push(key_value("host.id", Value::StringValue(id.clone())));
    }
    attributes.push(key_value("host.arch", Value::StringValue(host_arch().to_owned())));
    attributes.push(key_value("os.type", Value::StringValue("linux".to_owned())));
    let service = resource.service_name.clone().unwrap_or_else(|| executable.clone());
    attributes.push(key_value("service.name", Value::StringValue(service)));
    attributes.push(key_value("process.pid", Value::IntValue(i64::from(pid))));
    attributes.push(key_value("process.executable.name", Value::StringValue(executable)));
    if let Some(path) = path {
        attributes.push(key_value("process.executable.path", Value::StringValue(path)));
    }
    if let Some(runtime) = runtime {
        attributes.push(key_value(
            "process.runtime.name",
            Value::StringValue(runtime.name.to_owned()),
        ));
        if let Some(version) = runtime.version {
            attributes.push(key_value("process.runtime.version", Value::StringValue(version)));
        }
        attributes.push(key_value(
            "process.runtime.description",
            Value::StringValue(runtime.description),
        ));
    }
    if let Some(id) = container.id {
        attributes.push(key_value("container.id", Value::StringValue(id)));
    }
    if let Some(uid) = container.pod_uid {
        attributes.push(key_value("k8s.pod.uid", Value::StringValue(uid)));
    }
    // The configured ones never replace what was read of the process.
    for (key, value) in &resource.attributes {
        if !attributes.iter().any(|kv| kv.key == *key) {
            attributes.push(key_value(key, Value::StringValue(value.clone())));
        }
    }
    Resource {
        attributes,
        ..Default::default()
    }
}

fn key_value(key: &str, value: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(value) }),
        key_strindex: 0,
    }
}

/// What the samples of an event measure.
struct Measure {
    sample_type: (&'static str, &'static str),
    /// The value of a sample is its `weight_ns` rather than its count.
    weighted: bool,
    /// `period_type` and the period, for sampling events.
    period: Option<((&'static str, &'static str), i64)>,
}

fn measure(event: &str, profile: &Resolved) -> Measure {
    match event {
        "cpu-clock" => Measure {
            sample_type: ("samples", "count"),
            weighted: false,
            period: Some((
                ("cpu", "nanoseconds"),
                i64::try_from(profile.period_ns).unwrap_or(i64::MAX),
            )),
        },
        "offcpu" => Measure {
            sample_type: ("off_cpu", "nanoseconds"),
            weighted: true,
            period: None,
        },
        _ => Measure {
            sample_type: ("events", "count"),
            weighted: false,
            period: None,
        },
    }
}

/// The profile of one event of one process.
fn event_profile(event: &str, stacks: &[&ResolvedStack], profile: &Resolved, dict: &mut Dictionary) -> Profile {
    let measure = measure(event, profile);
    let event_attribute = dict.attribute("sframe_trace.event", Attr::Str(event.to_owned()));
    let mut samples: Vec<Sample> = Vec::new();
    let mut seen: HashMap<(i32, Vec<i32>), usize> = HashMap::new();
    for stack in stacks {
        let stack_index = dict.stack(&stack.frames);
        let mut attributes = vec![
            dict.attribute("thread.id", Attr::Int(i64::from(stack.tid))),
            dict.attribute("thread.name", Attr::Str(stack.comm.clone())),
        ];
        if let Some(cpu) = stack.cpu {
            attributes.push(dict.attribute("cpu.logical_number", Attr::Int(i64::from(cpu))));
        }
        let value = if measure.weighted { stack.weight_ns } else { stack.count };
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        // A sample's identity is its stack and attributes: merge repeats.
        match seen.get(&(stack_index, attributes.clone())) {
            Some(&i) => samples[i].values[0] = samples[i].values[0].saturating_add(value),
            None => {
                seen.insert((stack_index, attributes.clone()), samples.len());
                samples.push(Sample {
                    stack_index,
                    attribute_indices: attributes,
                    link_index: 0,
                    values: vec![value],
                    timestamps_unix_nano: Vec::new(),
                });
            }
        }
    }
    let value_type = |dict: &mut Dictionary, (kind, unit): (&str, &str)| ValueType {
        type_strindex: dict.string(kind),
        unit_strindex: dict.string(unit),
    };
    let sample_type = Some(value_type(dict, measure.sample_type));
    let (period_type, period) = match measure.period {
        Some((kind, period)) => (Some(value_type(dict, kind)), period),
        None => (None, 0),
    };
    Profile {
        sample_type,
        samples,
        time_unix_nano: profile.start_unix_ns,
        duration_nano: profile.duration_ns,
        period_type,
        period,
        attribute_indices: vec![event_attribute],
        ..Default::default()
    }
}

/// An attribute value of the dictionary (the kinds this encoder writes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Attr {
    Int(i64),
    Str(String),
}

/// A location's identity: mapping, address, lines (function, line) and frame-type attribute.
type LocationKey = (i32, u64, Vec<(i32, i64)>, i32);

/// The dictionary under construction, with the reverse maps that deduplicate it.
struct Dictionary<'a> {
    objects: &'a [ObjectInfo],
    table: ProfilesDictionary,
    strings: HashMap<String, i32>,
    attributes: HashMap<(i32, Attr), i32>,
    functions: HashMap<(i32, i32), i32>,
    mappings: HashMap<usize, i32>,
    locations: HashMap<LocationKey, i32>,
    stacks: HashMap<Vec<i32>, i32>,
}

/// The index the next entry of `table` gets.
fn next_index<T>(table: &[T]) -> i32 {
    i32::try_from(table.len()).unwrap_or(i32::MAX)
}

impl<'a> Dictionary<'a> {
    fn new(objects: &'a [ObjectInfo]) -> Self {
        Dictionary {
            objects,
            table: ProfilesDictionary {
                mapping_table: vec![Mapping::default()],
                location_table: vec![Location::default()],
                function_table: vec![Function::default()],
                link_table: vec![Default::default()],
                string_table: vec![String::new()],
                attribute_table: vec![KeyValueAndUnit::default()],
                stack_table: vec![Stack::default()],
            },
            strings: HashMap::from([(String::new(), 0)]),
            attributes: HashMap::new(),
            functions: HashMap::new(),
            mappings: HashMap::new(),
            locations: HashMap::new(),
            stacks: HashMap::new(),
        }
    }

    fn string(&mut self, s: &str) -> i32 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = next_index(&self.table.string_table);
        self.table.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn attribute(&mut self, key: &str, value: Attr) -> i32 {
        let key_strindex = self.string(key);
        if let Some(&i) = self.attributes.get(&(key_strindex, value.clone())) {
            return i;
        }
        let i = next_index(&self.table.attribute_table);
        let any = match &value {
            Attr::Int(n) => Value::IntValue(*n),
            Attr::Str(s) => Value::StringValue(s.clone()),
        };
        self.table.attribute_table.push(KeyValueAndUnit {
            key_strindex,
            value: Some(AnyValue { value: Some(any) }),
            unit_strindex: 0,
        });
        self.attributes.insert((key_strindex, value), i);
        i
    }

    fn function(&mut self, name: &str, file: Option<&str>) -> i32 {
        let key = (self.string(name), file.map_or(0, |f| self.string(f)));
        if let Some(&i) = self.functions.get(&key) {
            return i;
        }
        let i = next_index(&self.table.function_table);
        self.table.function_table.push(Function {
            name_strindex: key.0,
            filename_strindex: key.1,
            ..Default::default()
        });
        self.functions.insert(key, i);
        i
    }

    /// The mapping of an object: its path and build-id (0 for an index outside the model).
    fn mapping(&mut self, object: usize) -> i32 {
        if let Some(&i) = self.mappings.get(&object) {
            return i;
        }
        let Some(info) = self.objects.get(object) else { return 0 };
        let filename_strindex = self.string(&info.path);
        let attribute_indices = match &info.build_id {
            Some(id) if !id.is_empty() => vec![self.attribute("process.executable.build_id.gnu", Attr::Str(hex(id)))],
            _ => Vec::new(),
        };
        let i = next_index(&self.table.mapping_table);
        self.table.mapping_table.push(Mapping {
            filename_strindex,
            attribute_indices,
            ..Default::default()
        });
        self.mappings.insert(object, i);
        i
    }

    /// The location of `frame` with the functions `lines` (inlined first).
    fn location(&mut self, frame: &ResolvedFrame, lines: Vec<(i32, i64)>) -> i32 {
        let mapping_index = frame.object.map_or(0, |o| self.mapping(o));
        let address = if mapping_index == 0 { frame.addr } else { frame.offset };
        // The semantic conventions' frame types.
        let kind = match frame.source {
            FrameSource::Kernel => "kernel",
            FrameSource::Python => "cpython",
            _ => "native",
        };
        let kind = self.attribute("profile.frame.type", Attr::Str(kind.to_owned()));
        let key = (mapping_index, address, lines, kind);
        if let Some(&i) = self.locations.get(&key) {
            return i;
        }
        let i = next_index(&self.table.location_table);
        self.table.location_table.push(Location {
            mapping_index,
            address,
            lines: key
                .2
                .iter()
                .map(|&(function_index, line)| Line {
                    function_index,
                    line,
                    column: 0,
                })
                .collect(),
            attribute_indices: vec![kind],
        });
        self.locations.insert(key, i);
        i
    }

    /// The stack of `frames` (innermost first; inlined frames precede the frame they are in).
    fn stack(&mut self, frames: &[ResolvedFrame]) -> i32 {
        let mut location_indices = Vec::new();
        let mut lines = Vec::new();
        for (i, frame) in frames.iter().enumerate() {
            if let Some(symbol) = &frame.symbol {
                let function = self.function(symbol, frame.file.as_deref());
                lines.push((function, frame.line.map_or(0, i64::from)));
            }
            // The frame an inlined run belongs to ends it; a run cut off at the end of a
            // truncated stack stands at its last frame.
            if !frame.inlined || i + 1 == frames.len() {
                location_indices.push(self.location(frame, std::mem::take(&mut lines)));
            }
        }
        if let Some(&i) = self.stacks.get(&location_indices) {
            return i;
        }
        let i = next_index(&self.table.stack_table);
        self.table.stack_table.push(Stack {
            location_indices: location_indices.clone(),
        });
        self.stacks.insert(location_indices, i);
        i
    }
}

/// Lower-case hex, as the semantic conventions write build-ids.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
