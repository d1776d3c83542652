//! The snapshot archive reader on arbitrary bytes, and on arbitrary tar streams behind a
//! valid gzip header: it must return a tree or an error, never panic, hang or grow without
//! bound. Whatever it accepts has every symlink resolving inside the tree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Write;
use topo_source::{archive, tree};

fuzz_target!(|data: &[u8]| {
    check(data);
    // Most random bytes fail the gzip header; compress them so the tar reader sees them too.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    if gz.write_all(data).is_ok()
        && let Ok(bytes) = gz.finish()
    {
        check(&bytes);
    }
});

fn check(bytes: &[u8]) {
    let Ok(mem) = archive::load_from(bytes, "fuzz.tar.gz") else {
        return;
    };
    // Links are checked from the archive's top; a snapshot one folder down is seen from there.
    if mem.prefix().as_os_str().is_empty() {
        for l in mem.links() {
            assert!(tree::resolve(&mem, &l, true).is_ok(), "{l:?}");
        }
    }
}
