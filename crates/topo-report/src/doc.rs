//! Every JSON and YAML document topo prints goes through here: JSON in topo's layout with
//! strings escaped for terminals ([`crate::layout`]), written as it is encoded, never held
//! whole.
//! Numbers carry full precision (issue 27): a document is data, and rounding belongs to the
//! text views that print it. docs/schema/README.md states the rule for readers.

use crate::layout::Nested;
use serde::Serialize;

/// `doc` as JSON in topo's layout ([`crate::layout`]) with a final newline.
pub fn json<T: Serialize + ?Sized>(doc: &T) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(4096);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Nested::at(0));
    doc.serialize(&mut ser)?;
    out.push(b'\n');
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// [`json`] written to `w` as it is encoded: a document of hundreds of megabytes (show and
/// plan at thousands of nodes) is never held whole in memory. Same bytes as [`json`].
pub fn json_to<T: Serialize + ?Sized>(w: &mut dyn std::io::Write, doc: &T) -> std::io::Result<()> {
    use std::io::Write as _;
    // Buffered here, statically typed: serde_json writes a few bytes at a time.
    let mut w = std::io::BufWriter::with_capacity(1 << 16, w);
    let mut ser = serde_json::Serializer::with_formatter(&mut w, Nested::at(0));
    doc.serialize(&mut ser)?;
    w.write_all(b"\n")?;
    w.flush()
}

/// A JSON object written field by field in [`json_to`]'s bytes, from values encoded
/// elsewhere (other threads): whole ([`JsonObject::raw`]) or, for arrays, in pieces.
pub struct JsonObject<'w> {
    w: std::io::BufWriter<&'w mut dyn std::io::Write>,
    first: bool,
    /// Inside an array of [`Self::array_start`]: whether an element was written.
    in_array: Option<bool>,
}

impl<'w> JsonObject<'w> {
    pub fn start(w: &'w mut dyn std::io::Write) -> std::io::Result<JsonObject<'w>> {
        use std::io::Write as _;
        let mut w = std::io::BufWriter::with_capacity(1 << 16, w);
        w.write_all(b"{")?;
        Ok(JsonObject {
            w,
            first: true,
            in_array: None,
        })
    }

    fn key(&mut self, key: &str) -> std::io::Result<()> {
        use std::io::Write as _;
        let sep: &[u8] = if self.first { b"\n  \"" } else { b",\n  \"" };
        self.first = false;
        self.w.write_all(sep)?;
        // Field names are the document's own identifiers: nothing to escape.
        self.w.write_all(key.as_bytes())?;
        self.w.write_all(b"\": ")
    }

    /// A field whose whole value is `bytes`, encoded by [`json_value_to`].
    pub fn raw(&mut self, key: &str, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write as _;
        self.key(key)?;
        self.w.write_all(bytes)
    }

    /// Opens an array field whose elements come as pieces of [`items_to`]'s bytes
    /// ([`Self::array_piece`]), closed by [`Self::array_end`]: an array of strings or objects,
    /// one element a line. An array of numbers is one line ([`crate::layout`]): encode it
    /// whole ([`Self::raw`]).
    pub fn array_start(&mut self, key: &str) -> std::io::Result<()> {
        use std::io::Write as _;
        self.key(key)?;
        self.in_array = Some(false);
        self.w.write_all(b"[")
    }

    pub fn array_piece(&mut self, piece: &[u8]) -> std::io::Result<()> {
        use std::io::Write as _;
        if piece.is_empty() {
            return Ok(());
        }
        // Every element of a piece starts with its comma; the array's first has none.
        debug_assert_eq!(piece[0], b',', "an array piece not made by items_to");
        let piece = match self.in_array {
            Some(false) => &piece[1..],
            _ => piece,
        };
        self.in_array = Some(true);
        self.w.write_all(piece)
    }

    pub fn array_end(&mut self) -> std::io::Result<()> {
        use std::io::Write as _;
        let any = self.in_array.take() == Some(true);
        self.w.write_all(if any { b"\n  ]" } else { b"]" })
    }

    /// Closes the object, with the final newline [`json_to`] writes.
    pub fn end(mut self) -> std::io::Result<()> {
        use std::io::Write as _;
        self.w
            .write_all(if self.first { b"{}\n" } else { b"\n}\n" })?;
        self.w.flush()
    }
}

/// `v` as the value of a top-level field: [`json`]'s bytes for `v` as they stand inside the document (every line after the first
/// one level further in).
pub fn json_value_to<T: Serialize + ?Sized>(
    w: &mut impl std::io::Write,
    v: &T,
) -> std::io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, Nested::at(1));
    v.serialize(&mut ser)?;
    Ok(())
}

/// The elements of a top-level array field named `key` as they stand inside the document,
/// each with the comma before it (see [`JsonObject::array_piece`]): a run of an array that
/// is encoded in pieces, on several threads.
pub fn items_to<T: Serialize>(
    w: &mut Vec<u8>,
    items: impl IntoIterator<Item = T>,
) -> std::io::Result<()> {
    for v in items {
        w.extend_from_slice(b",\n    ");
        let mut ser = serde_json::Serializer::with_formatter(&mut *w, Nested::at(2));
        v.serialize(&mut ser)?;
    }
    Ok(())
}

/// `doc` as YAML.
pub fn yaml<T: Serialize + ?Sized>(doc: &T) -> Result<String, yaml_serde::Error> {
    yaml_serde::to_string(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    struct Row {
        time_us: f64,
        busbw_gbps: Option<f64>,
        points_us: Vec<f64>,
        bw_intra: f64,
        ratio: f64,
        bytes: u64,
        inner: Inner,
    }
    #[derive(Serialize)]
    struct Inner {
        lat_us: f64,
        plain: f64,
    }

    #[test]
    fn floats_keep_full_precision_at_any_depth() {
        let r = Row {
            time_us: 4428.294627383016,
            busbw_gbps: Some(370.849),
            points_us: vec![1.234, 5.678],
            bw_intra: 0.24,
            ratio: 1.23456,
            bytes: 1 << 40,
            inner: Inner {
                lat_us: -0.001,
                plain: 0.333333,
            },
        };
        let v: serde_json::Value = serde_json::from_str(&json(&r).unwrap()).unwrap();
        assert_eq!(v["time_us"].as_f64(), Some(4428.294627383016));
        assert_eq!(v["busbw_gbps"].as_f64(), Some(370.849));
        assert_eq!(v["inner"]["lat_us"].as_f64(), Some(-0.001));
        assert_eq!(v["bytes"].as_u64(), Some(1 << 40));
        let y = yaml(&r).unwrap();
        assert!(y.contains("time_us: 4428.294627383016"), "{y}");
    }

    #[test]
    fn c1_and_bidi_controls_are_escaped_and_read_back() {
        let mut m = BTreeMap::new();
        m.insert("k\u{9b}", "a\u{9b}2J\u{202e}b\u{85}é\n");
        let text = json(&m).unwrap();
        assert_eq!(
            text,
            "{\n  \"k\\u009b\": \"a\\u009b2J\\u202eb\\u0085é\\n\"\n}\n"
        );
        let back: BTreeMap<String, String> = serde_json::from_str(&text).unwrap();
        assert_eq!(back["k\u{9b}"], m["k\u{9b}"]);
    }

    #[test]
    fn streamed_json_is_the_same_bytes() {
        let doc = (
            Inner {
                lat_us: 12.3456,
                plain: 0.5,
            },
            vec![1u32, 2],
            Vec::<u8>::new(),
        );
        let mut out = vec![];
        json_to(&mut out, &doc).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), json(&doc).unwrap());
    }

    #[test]
    fn an_object_written_in_pieces_is_the_same_bytes() {
        #[derive(Serialize)]
        struct Doc {
            name: &'static str,
            inner: Inner,
            list: Vec<Vec<u32>>,
            empty: Vec<u8>,
            words: Vec<&'static str>,
        }
        let doc = Doc {
            name: "a\nb",
            inner: Inner {
                lat_us: 12.3456,
                plain: 0.5,
            },
            list: vec![vec![1, 2], vec![], vec![3]],
            empty: vec![],
            words: vec!["one", "two"],
        };
        let mut out = vec![];
        {
            let mut o = JsonObject::start(&mut out).unwrap();
            let value = |v: &dyn erased::Value| {
                let mut b = vec![];
                v.encode(&mut b);
                b
            };
            o.raw("name", &value(&doc.name)).unwrap();
            o.raw("inner", &value(&doc.inner)).unwrap();
            o.array_start("list").unwrap();
            // Empty pieces anywhere, the first element in any piece.
            o.array_piece(&[]).unwrap();
            for run in doc.list.chunks(2) {
                let mut p = vec![];
                items_to(&mut p, run).unwrap();
                o.array_piece(&p).unwrap();
                o.array_piece(&[]).unwrap();
            }
            o.array_end().unwrap();
            o.array_start("empty").unwrap();
            o.array_end().unwrap();
            let mut p = vec![];
            items_to(&mut p, &doc.words).unwrap();
            o.array_start("words").unwrap();
            o.array_piece(&p).unwrap();
            o.array_end().unwrap();
            o.end().unwrap();
        }
        assert_eq!(String::from_utf8(out).unwrap(), json(&doc).unwrap());
    }

    /// Values of several types behind one reference, for the test above.
    mod erased {
        pub trait Value {
            fn encode(&self, out: &mut Vec<u8>);
        }
        impl<T: serde::Serialize> Value for T {
            fn encode(&self, out: &mut Vec<u8>) {
                super::super::json_value_to(out, self).unwrap();
            }
        }
    }
}
