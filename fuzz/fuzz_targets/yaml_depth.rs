//! Any text: the nesting check must not panic, and whatever it lets through must load in
//! yaml_serde no deeper than the limit (a small limit, so the fuzzer reaches it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use topo_source::yaml_depth::check;

const LIMIT: usize = 4;

fn depth(v: &yaml_serde::Value) -> usize {
    use yaml_serde::Value;
    match v {
        Value::Sequence(s) => 1 + s.iter().map(depth).max().unwrap_or(0),
        Value::Mapping(m) => {
            1 + m
                .iter()
                .map(|(k, v)| depth(k).max(depth(v)))
                .max()
                .unwrap_or(0)
        }
        Value::Tagged(t) => depth(&t.value),
        _ => 0,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Aliases can make a value deeper than its text; the check bounds the text.
    if text.contains('*') || check(text, LIMIT).is_err() {
        return;
    }
    if let Ok(v) = yaml_serde::from_str::<yaml_serde::Value>(text) {
        assert!(depth(&v) <= LIMIT, "{text:?} passed the check");
    }
});
