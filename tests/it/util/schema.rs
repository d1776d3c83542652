//! The JSON Schema (2020-12) keywords docs/schema/ uses, checked against a document. A keyword
//! outside that set fails the check rather than being skipped, so a schema can never promise a
//! constraint the tests do not hold. Written here instead of taking a validator crate: the one
//! used before (boon) built 40 CPU-seconds of URL and Unicode crates into every fresh
//! `cargo test` for what is about 150 lines (issue 42 item 6).

use serde_json::Value;

/// Keywords that describe and constrain nothing.
const ANNOTATIONS: [&str; 7] = [
    "$schema",
    "$id",
    "$defs",
    "title",
    "description",
    "examples",
    "default",
];

/// Every way `doc` breaks `schema` (whose `$ref`s resolve in `root`), as `path: why` lines.
pub fn errors(root: &Value, doc: &Value) -> Vec<String> {
    let mut out = vec![];
    check(root, root, doc, "", &mut out);
    out
}

fn check(root: &Value, schema: &Value, doc: &Value, at: &str, out: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            out.push(format!("{at}: nothing is allowed here"));
        }
        return;
    };
    for (k, v) in s {
        match k.as_str() {
            "$ref" => check(root, resolve(root, v), doc, at, out),
            "type" => type_ok(v, doc, at, out),
            "enum" => {
                if !v.as_array().is_some_and(|a| a.contains(doc)) {
                    out.push(format!("{at}: {doc} is not one of {v}"));
                }
            }
            "const" if v != doc => out.push(format!("{at}: {doc} is not {v}")),
            "minimum" | "maximum" => bound(k, v, doc, at, out),
            "pattern" => pattern(v, doc, at, out),
            "anyOf" => any_of(root, v, doc, at, out),
            "properties" | "required" | "additionalProperties" | "propertyNames" => {
                object(root, s, k, doc, at, out)
            }
            "items" | "prefixItems" | "minItems" | "maxItems" => array(root, s, k, doc, at, out),
            "const" => {}
            a if ANNOTATIONS.contains(&a) => {}
            other => panic!(
                "schema keyword `{other}` at {at:?} is not checked by tests/it/util/schema.rs"
            ),
        }
    }
}

/// `#/$defs/name`: the only references docs/schema/ makes.
fn resolve<'a>(root: &'a Value, r: &Value) -> &'a Value {
    let r = r.as_str().expect("$ref is a string");
    let ptr = r
        .strip_prefix('#')
        .unwrap_or_else(|| panic!("$ref {r} is not local"));
    root.pointer(ptr)
        .unwrap_or_else(|| panic!("$ref {r} names nothing"))
}

fn type_ok(t: &Value, doc: &Value, at: &str, out: &mut Vec<String>) {
    let is = |name: &str| match name {
        "object" => doc.is_object(),
        "array" => doc.is_array(),
        "string" => doc.is_string(),
        "boolean" => doc.is_boolean(),
        "null" => doc.is_null(),
        "number" => doc.is_number(),
        "integer" => doc.as_f64().is_some_and(|x| x.fract() == 0.0),
        other => panic!("unknown type {other}"),
    };
    let ok = match t {
        Value::String(one) => is(one),
        Value::Array(any) => any.iter().any(|n| is(n.as_str().expect("type name"))),
        _ => panic!("type {t} is neither a name nor a list"),
    };
    if !ok {
        out.push(format!("{at}: {doc} is not of type {t}"));
    }
}

fn bound(k: &str, v: &Value, doc: &Value, at: &str, out: &mut Vec<String>) {
    let (Some(x), Some(b)) = (doc.as_f64(), v.as_f64()) else {
        return;
    };
    if (k == "minimum" && x < b) || (k == "maximum" && x > b) {
        out.push(format!("{at}: {x} is beyond the {k} {b}"));
    }
}

fn pattern(p: &Value, doc: &Value, at: &str, out: &mut Vec<String>) {
    let Some(text) = doc.as_str() else {
        return;
    };
    // One compile per pattern, not per value: a plan has a pattern-checked field per GPU.
    thread_local! {
        static COMPILED: std::cell::RefCell<std::collections::HashMap<String, regex::Regex>> =
            Default::default();
    }
    let p_str = p.as_str().expect("pattern is a string");
    let ok = COMPILED.with_borrow_mut(|c| {
        c.entry(p_str.to_string())
            .or_insert_with(|| regex::Regex::new(p_str).expect("pattern"))
            .is_match(text)
    });
    if !ok {
        out.push(format!("{at}: {text:?} does not match {p}"));
    }
}

fn any_of(root: &Value, v: &Value, doc: &Value, at: &str, out: &mut Vec<String>) {
    let alts = v.as_array().expect("anyOf is a list");
    let fits = |s: &Value| {
        let mut e = vec![];
        check(root, s, doc, at, &mut e);
        e.is_empty()
    };
    if !alts.iter().any(fits) {
        out.push(format!("{at}: {doc} fits none of anyOf"));
    }
}

type Obj = serde_json::Map<String, Value>;

fn object(root: &Value, s: &Obj, k: &str, doc: &Value, at: &str, out: &mut Vec<String>) {
    let Some(d) = doc.as_object() else {
        return;
    };
    let props = s.get("properties").and_then(Value::as_object);
    match k {
        "properties" => {
            for (name, sub) in props.into_iter().flatten() {
                if let Some(v) = d.get(name) {
                    check(root, sub, v, &format!("{at}/{name}"), out);
                }
            }
        }
        "required" => {
            for name in s[k].as_array().into_iter().flatten() {
                let name = name.as_str().expect("required names");
                if !d.contains_key(name) {
                    out.push(format!("{at}: `{name}` is required"));
                }
            }
        }
        "additionalProperties" => {
            for (name, v) in d {
                if !props.is_some_and(|p| p.contains_key(name)) {
                    check(root, &s[k], v, &format!("{at}/{name}"), out);
                }
            }
        }
        _ => {
            for name in d.keys() {
                check(
                    root,
                    &s[k],
                    &Value::from(name.as_str()),
                    &format!("{at}/{name}"),
                    out,
                );
            }
        }
    }
}

fn array(root: &Value, s: &Obj, k: &str, doc: &Value, at: &str, out: &mut Vec<String>) {
    let Some(a) = doc.as_array() else {
        return;
    };
    let prefix = s.get("prefixItems").and_then(Value::as_array);
    match k {
        "prefixItems" => {
            for (i, (sub, v)) in prefix.into_iter().flatten().zip(a).enumerate() {
                check(root, sub, v, &format!("{at}/{i}"), out);
            }
        }
        "items" => {
            let skip = prefix.map_or(0, Vec::len);
            for (i, v) in a.iter().enumerate().skip(skip) {
                check(root, &s[k], v, &format!("{at}/{i}"), out);
            }
        }
        _ => {
            let n = s[k].as_u64().expect("a count") as usize;
            if (k == "minItems" && a.len() < n) || (k == "maxItems" && a.len() > n) {
                out.push(format!("{at}: {} item(s), {k} {n}", a.len()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::errors;
    use serde_json::json;

    fn schema() -> serde_json::Value {
        json!({
            "$defs": {"hex": {"type": "string", "pattern": "^0x[0-9a-f]{4}$"}},
            "type": "object",
            "required": ["n", "kind"],
            "additionalProperties": false,
            "propertyNames": {"pattern": "^[a-z]+$"},
            "properties": {
                "n": {"type": "integer", "minimum": 1},
                "kind": {"enum": ["a", "b"]},
                "id": {"$ref": "#/$defs/hex"},
                "v": {"const": 1},
                "x": {"anyOf": [{"type": "null"}, {"type": "number", "minimum": 0}]},
                "pair": {"type": "array", "prefixItems": [{"type": "string"}],
                         "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}
            }
        })
    }

    #[test]
    fn a_document_that_keeps_every_rule_passes() {
        let doc = json!({"n": 2, "kind": "a", "id": "0x10de", "v": 1, "x": null,
                         "pair": ["s", 1, 2]});
        assert_eq!(errors(&schema(), &doc), Vec::<String>::new());
    }

    /// Each rule broken alone is caught, and named where it broke.
    #[test]
    fn each_broken_rule_is_named() {
        let cases = [
            (json!({"n": 1.5, "kind": "a"}), "/n: 1.5 is not of type"),
            (json!({"n": 0, "kind": "a"}), "/n: 0 is beyond the minimum"),
            (json!({"n": 1}), "`kind` is required"),
            (json!({"n": 1, "kind": "c"}), "/kind: \"c\" is not one of"),
            (
                json!({"n": 1, "kind": "a", "id": "0x10DE"}),
                "/id: \"0x10DE\" does not match",
            ),
            (json!({"n": 1, "kind": "a", "v": 2}), "/v: 2 is not 1"),
            (
                json!({"n": 1, "kind": "a", "x": -1}),
                "/x: -1 fits none of anyOf",
            ),
            (
                json!({"n": 1, "kind": "a", "pair": [1]}),
                "/pair/0: 1 is not of type",
            ),
            (
                json!({"n": 1, "kind": "a", "pair": ["s", "t"]}),
                "/pair/1: \"t\" is not of type",
            ),
            (
                json!({"n": 1, "kind": "a", "pair": []}),
                "/pair: 0 item(s), minItems 1",
            ),
            (
                json!({"n": 1, "kind": "a", "pair": ["s", 1, 2, 3]}),
                "maxItems 3",
            ),
            (
                json!({"n": 1, "kind": "a", "more": 1}),
                "/more: nothing is allowed here",
            ),
            (
                json!({"n": 1, "kind": "a", "Up": 1}),
                "/Up: \"Up\" does not match",
            ),
        ];
        for (doc, want) in cases {
            let e = errors(&schema(), &doc);
            assert!(e.iter().any(|l| l.contains(want)), "{doc}: {e:?}");
        }
    }

    #[test]
    #[should_panic(expected = "is not checked")]
    fn a_keyword_the_checker_does_not_know_fails_the_check() {
        errors(
            &json!({"type": "string", "format": "date-time"}),
            &json!("x"),
        );
    }
}
