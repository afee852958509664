//! The dump side of the golden tests: reads the JSON of `sframe-trace dump --json` (the documented
//! contract, by field name, without the crate's types) into the model of `readelf.rs`, keeping
//! only what readelf can show.

use serde_json::Value;

use super::readelf::{Func, Loc, Row, Val};

pub(crate) fn json_get<'a>(v: &'a Value, key: &str) -> Result<&'a Value, String> {
    v.get(key).ok_or_else(|| format!("JSON: no `{key}` in {v}"))
}
pub(crate) fn json_i64(v: &Value, key: &str) -> Result<i64, String> {
    json_get(v, key)?
        .as_i64()
        .ok_or_else(|| format!("JSON: `{key}` is not an integer in {v}"))
}
pub(crate) fn json_u64(v: &Value, key: &str) -> Result<u64, String> {
    json_get(v, key)?
        .as_u64()
        .ok_or_else(|| format!("JSON: `{key}` is not an unsigned integer in {v}"))
}
fn json_bool(v: &Value, key: &str) -> Result<bool, String> {
    json_get(v, key)?
        .as_bool()
        .ok_or_else(|| format!("JSON: `{key}` is not a bool in {v}"))
}
fn json_str<'a>(v: &'a Value, key: &str) -> Result<&'a str, String> {
    json_get(v, key)?
        .as_str()
        .ok_or_else(|| format!("JSON: `{key}` is not a string in {v}"))
}

fn json_loc(v: &Value) -> Result<Loc, String> {
    Ok(Loc {
        base: json_str(v, "base")?.to_owned(),
        offset: json_i64(v, "offset")?,
        deref: json_bool(v, "deref")?,
    })
}

/// `fp_offset`/`ra_offset` and the optional `fp_rule`/`ra_rule` of a row, as readelf shows them.
fn json_val(row: &Value, which: &str) -> Result<Val, String> {
    if let Some(rule) = row.get(format!("{which}_rule")).filter(|r| !r.is_null()) {
        let loc = json_loc(rule)?;
        // readelf prints a CFA-based FLEX rule as `c+N` whether or not it dereferences.
        return Ok(if loc.base == "cfa" {
            Val::Cfa(loc.offset)
        } else {
            Val::Reg(loc)
        });
    }
    match json_get(row, &format!("{which}_offset"))? {
        Value::Null => Ok(Val::Untracked),
        v => v
            .as_i64()
            .map(Val::Cfa)
            .ok_or_else(|| format!("JSON: bad {which}_offset in {row}")),
    }
}

pub(crate) fn json_func(f: &Value, version: i64) -> Result<Func, String> {
    let mask = match json_str(f, "pc_type")? {
        "inc" => false,
        "mask" => true,
        other => return Err(format!("JSON: pc_type {other:?}")),
    };
    // v1 FDEs have no rep_size field (v1 describes PCMASK with a bit mask instead).
    if mask && version >= 2 && json_u64(f, "rep_size")? == 0 {
        return Err(format!("JSON: PCMASK function with rep_size 0: {f}"));
    }
    let rows = json_get(f, "rows")?
        .as_array()
        .ok_or("JSON: rows is not an array")?
        .iter()
        .map(|r| {
            let start = json_u64(r, "start")?;
            if json_bool(r, "ra_undefined")? {
                return Ok(Row::RaUndefined { start });
            }
            Ok(Row::Rules {
                start,
                cfa: json_loc(json_get(r, "cfa")?)?,
                fp: json_val(r, "fp")?,
                ra: json_val(r, "ra")?,
                mangled_ra: json_bool(r, "mangled_ra")?,
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Func {
        start: json_u64(f, "start")?,
        size: json_u64(f, "size")?,
        mask,
        flex: match json_str(f, "fde_type")? {
            "default" => false,
            "flex" => true,
            other => return Err(format!("JSON: fde_type {other:?}")),
        },
        signal: json_bool(f, "signal")?,
        key_b: match json_str(f, "pauth_key")? {
            "a" => false,
            "b" => true,
            other => return Err(format!("JSON: pauth_key {other:?}")),
        },
        rows,
    })
}
