//! The json stream: one JSON object per sample, on its own line, written and flushed as the
//! sample arrives, for `jq`, log pipelines and scripts that watch a process live:
//!
//! ```json
//! {"time":1763700000.123456789,"pid":7,"tid":8,"comm":"app","cpu":1,"event":"cpu-clock",
//!  "weight_ns":2004008,"frames":[{"addr":"0x55d0c2a01136","symbol":"spin","object":"/app",
//!  "offset":"0x1136","file":"/src/app.c","line":12,"inlined":false,"source":"sframe"}],
//!  "truncated":null}
//! ```
//!
//! `truncated` is `null` for a complete stack, else why its user frames end early (the stop
//! reason, as the summary counts it, e.g. `"no_mapping"`).
//!
//! `time` is Unix time in seconds with nanosecond digits; frames go from the innermost (kernel
//! frames first when the sample hit the kernel) to `_start`; addresses are hex strings (kernel
//! addresses do not fit a JSON reader's doubles); unknown values are `null`: a frame without a
//! symbol has `"symbol":null` with its object and offset. Strings carry no raw control
//! character (C0, DEL and C1 are `\u00XX` escapes).

use std::io::{self, Write};

use super::model::{ObjectInfo, ResolvedSample};

/// Write one sample as a line and flush it.
pub fn write_sample(out: &mut impl Write, sample: &ResolvedSample, objects: &[ObjectInfo]) -> io::Result<()> {
    let mut line = Vec::with_capacity(256 + 160 * sample.frames.len());
    write!(
        line,
        "{{\"time\":{}.{:09},\"pid\":{},\"tid\":{},\"comm\":{},\"cpu\":{},\"event\":{},\"weight_ns\":{},\"frames\":[",
        sample.time_unix_ns / 1_000_000_000,
        sample.time_unix_ns % 1_000_000_000,
        sample.pid,
        sample.tid,
        quoted(&sample.comm),
        sample.cpu,
        quoted(&sample.event),
        sample.weight_ns,
    )?;
    for (i, frame) in sample.frames.iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        let object = frame.object.and_then(|o| objects.get(o)).map(|o| o.path.as_str());
        write!(
            line,
            "{{\"addr\":\"{:#x}\",\"symbol\":{},\"object\":{},\"offset\":\"{:#x}\",\"file\":{},\"line\":{},\"inlined\":{},\"source\":\"{}\"}}",
            frame.addr,
            nullable(frame.symbol.as_deref()),
            nullable(object),
            frame.offset,
            nullable(frame.file.as_deref()),
            frame.line.map_or_else(|| "null".to_owned(), |l| l.to_string()),
            frame.inlined,
            frame.source.name(),
        )?;
    }
    line.extend_from_slice(b"],\"truncated\":");
    line.extend_from_slice(nullable(sample.truncated).as_bytes());
    line.extend_from_slice(b"}\n");
    out.write_all(&line)?;
    out.flush()
}

/// `s` as a JSON string. serde_json escapes C0 control characters; DEL and C1 ones, valid raw
/// in JSON, are escaped too (`\u007f`), so that the stream printed on a terminal carries no
/// control character from names other users control. Readers get the same string either way.
fn quoted(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned());
    if !quoted.contains(|c| matches!(c, '\x7f'..='\u{9f}')) {
        return quoted;
    }
    let mut out = String::with_capacity(quoted.len() + 12);
    for c in quoted.chars() {
        if matches!(c, '\x7f'..='\u{9f}') {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

fn nullable(s: Option<&str>) -> String {
    s.map_or_else(|| "null".to_owned(), quoted)
}

#[cfg(test)]
mod tests;
