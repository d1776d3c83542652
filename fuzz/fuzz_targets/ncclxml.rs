//! Any bytes: the reader must not panic; whatever it accepts must write and read back, and
//! writing must be idempotent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use topo_source::ncclxml::write;
use topo_source::ncclxml::{parse_str, tree::decode_utf8};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = decode_utf8(data) else { return };
    let Ok(topo) = parse_str(text, "fuzz.xml") else {
        return;
    };
    let first = write(&topo).expect("a topology that was read can be written");
    let again = parse_str(&first, "rewritten.xml").expect("written XML reads back");
    assert_eq!(
        write(&again).expect("writes again"),
        first,
        "writing is idempotent"
    );
});
