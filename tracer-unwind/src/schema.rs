//! The shape of a JSON contract, drawn from example values of the types that serialize it:
//! a small JSON-Schema subset (`type`, `properties`, `items`, `additionalProperties`,
//! `nullable`) that the generated pages of `docs/schemas/` print and a test compares, so that a
//! field added, removed or retyped shows as a change to the page.

use serde_json::{Map, Value, json};

/// The shape every value of `examples` fits: the union of their types and, for objects, of
/// their fields. A field named `*_by_reason` is a map from reasons to counts.
pub fn shape(examples: &[&Value]) -> Value {
    let mut types: Vec<&'static str> = Vec::new();
    let mut note = |t: &'static str| {
        if !types.contains(&t) {
            types.push(t);
        }
    };
    let (mut objects, mut items) = (Vec::new(), Vec::new());
    for value in examples {
        match value {
            Value::Null => note("null"),
            Value::Bool(_) => note("boolean"),
            Value::Number(n) if n.is_f64() => note("number"),
            Value::Number(_) => note("integer"),
            Value::String(_) => note("string"),
            Value::Array(a) => {
                note("array");
                items.extend(a.iter());
            }
            Value::Object(o) => {
                note("object");
                objects.push(o);
            }
        }
    }
    let nullable = types.contains(&"null") && types.len() > 1;
    types.retain(|t| !nullable || *t != "null");
    // An integer where a number is also seen is a number.
    if types.contains(&"number") {
        types.retain(|t| *t != "integer");
    }
    let mut out = Map::new();
    out.insert("type".into(), json!(types.join("|")));
    if nullable {
        out.insert("nullable".into(), json!(true));
    }
    if !objects.is_empty() {
        let mut keys: Vec<&String> = objects.iter().flat_map(|o| o.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut properties = Map::new();
        for key in keys {
            let values: Vec<&Value> = objects.iter().filter_map(|o| o.get(key)).collect();
            let field = if key.ends_with("_by_reason") {
                let counts: Vec<&Value> = values
                    .iter()
                    .filter_map(|v| v.as_object())
                    .flat_map(|m| m.values())
                    .collect();
                let counts = if counts.is_empty() {
                    json!({"type": "integer"})
                } else {
                    shape(&counts)
                };
                json!({"type": "object", "additionalProperties": counts})
            } else {
                shape(&values)
            };
            properties.insert(key.clone(), field);
        }
        out.insert("properties".into(), Value::Object(properties));
    }
    if types.contains(&"array") {
        let items = if items.is_empty() { json!({}) } else { shape(&items) };
        out.insert("items".into(), items);
    }
    Value::Object(out)
}

/// `shapes` as the page prints it: pretty JSON, one newline at the end.
pub fn page(shapes: &Value) -> String {
    let mut text = serde_json::to_string_pretty(shapes).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests;
