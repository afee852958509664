//! Unit tests of `schema`; each test says what it proves.

use serde_json::json;

use super::shape;

/// Types unite across examples (a value that is sometimes null is nullable, integers among
/// numbers are numbers), objects unite their fields, arrays their items, and `*_by_reason`
/// fields are maps of counts whatever reasons the examples hold.
#[test]
fn shapes_unite_their_examples() {
    let a = json!({"n": 1, "x": null, "list": [{"k": "s"}], "seen_by_reason": {"gone": 2}});
    let b = json!({"n": 1.5, "x": {"y": true}, "list": [], "seen_by_reason": {}});
    assert_eq!(
        shape(&[&a, &b]),
        json!({
            "type": "object",
            "properties": {
                "list": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
                "n": {"type": "number"},
                "seen_by_reason": {"type": "object", "additionalProperties": {"type": "integer"}},
                "x": {"type": "object", "nullable": true, "properties": {"y": {"type": "boolean"}}},
            }
        })
    );
}
