//! Every JSON and YAML document topo prints goes through here, so numbers are rounded to
//! what they mean in one place, while they are written (no second copy of the document):
//! a field named `*_gbps` is a bandwidth, rounded to 0.1 GB/s; a field named `*_us` is a
//! time, rounded to 0.01 µs, and so are the times of calibrate's `points` (`[bytes, µs]`:
//! integers pass unchanged). Bytes and counts are integers in the types already. Other
//! floats (GT/s, NCCL's search speeds, ratios) are exact values and pass unchanged.
//! docs/schema/README.md states the rule for readers.

use serde::Serialize;
use serde::ser::{self, Serializer};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Unit {
    Plain,
    Gbps,
    Us,
}

fn unit_of(key: &str) -> Unit {
    if key.ends_with("_gbps") {
        Unit::Gbps
    } else if key.ends_with("_us") || key == "points" || key == "cross_points" {
        Unit::Us
    } else {
        Unit::Plain
    }
}

fn round(x: f64, u: Unit) -> f64 {
    let r = |scale: f64| {
        let y = (x * scale).round() / scale;
        // Keep -0.0 out of documents.
        if y == 0.0 { 0.0 } else { y }
    };
    match u {
        Unit::Plain => x,
        Unit::Gbps => r(10.0),
        Unit::Us => r(100.0),
    }
}

/// `doc` as pretty JSON with a final newline, numbers rounded by field name.
pub fn json<T: Serialize + ?Sized>(doc: &T) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(4096);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Nested::at(0));
    Rounded::new(doc).serialize(&mut ser)?;
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
    Rounded::new(doc).serialize(&mut ser)?;
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
    /// ([`Self::array_piece`]), closed by [`Self::array_end`].
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

/// `v` as the value of a top-level field whose name carries no unit (not `*_gbps`, `*_us`):
/// [`json`]'s bytes for `v` as they stand inside the document (every line after the first
/// one level further in).
pub fn json_value_to<T: Serialize + ?Sized>(
    w: &mut impl std::io::Write,
    v: &T,
) -> std::io::Result<()> {
    value_to(w, v, Unit::Plain)
}

/// The elements of a top-level array field named `key` as they stand inside the document,
/// each with the comma before it (see [`JsonObject::array_piece`]): a run of an array that
/// is encoded in pieces, on several threads.
pub fn items_to<T: Serialize>(
    w: &mut Vec<u8>,
    key: &str,
    items: impl IntoIterator<Item = T>,
) -> std::io::Result<()> {
    let u = unit_of(key);
    for v in items {
        w.extend_from_slice(b",\n    ");
        let mut ser = serde_json::Serializer::with_formatter(&mut *w, Nested::at(2));
        Rounded { v: &v, u }.serialize(&mut ser)?;
    }
    Ok(())
}

fn value_to<T: Serialize + ?Sized>(
    w: &mut impl std::io::Write,
    v: &T,
    u: Unit,
) -> std::io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, Nested::at(1));
    Rounded { v, u }.serialize(&mut ser)?;
    Ok(())
}

/// serde_json's pretty layout (two spaces a level) starting `level` levels in, which is how
/// a value sits inside the enclosing object; at level 0 it is `Serializer::pretty`'s bytes,
/// except that strings also escape what serde_json leaves raw (see [`write_safe_fragment`]). An adapter indenting after every newline did
/// the same at a tenth more CPU for `topo show` at 32,768 GPUs (one call per token).
struct Nested {
    level: usize,
    has_value: bool,
}

impl Nested {
    fn at(level: usize) -> Nested {
        Nested {
            level,
            has_value: false,
        }
    }

    fn newline<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b"\n")?;
        for _ in 0..self.level {
            w.write_all(b"  ")?;
        }
        Ok(())
    }

    fn open<W: ?Sized + std::io::Write>(&mut self, w: &mut W, c: &[u8]) -> std::io::Result<()> {
        self.level += 1;
        self.has_value = false;
        w.write_all(c)
    }

    fn close<W: ?Sized + std::io::Write>(&mut self, w: &mut W, c: &[u8]) -> std::io::Result<()> {
        self.level -= 1;
        if self.has_value {
            self.newline(w)?;
        }
        w.write_all(c)
    }

    fn item<W: ?Sized + std::io::Write>(&self, w: &mut W, first: bool) -> std::io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        self.newline(w)
    }
}

impl serde_json::ser::Formatter for Nested {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn write_string_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        write_safe_fragment(w, fragment)
    }
}

/// A piece of a JSON string that serde_json left unescaped, with the C1 controls
/// (U+0080-U+009F: U+009B is a terminal's CSI, like ESC [) and the bidirectional controls
/// written as `\uXXXX`: a document piped to a terminal or pager cannot then drive it or
/// reorder what it shows. JSON readers get the same string.
fn write_safe_fragment<W: ?Sized + std::io::Write>(w: &mut W, s: &str) -> std::io::Result<()> {
    let mut start = 0;
    for (i, c) in s.char_indices() {
        if topo_source::escape::needs_escape(c) {
            w.write_all(&s.as_bytes()[start..i])?;
            write!(w, "\\u{:04x}", c as u32)?;
            start = i + c.len_utf8();
        }
    }
    w.write_all(&s.as_bytes()[start..])
}

/// `doc` as YAML, numbers rounded by field name.
pub fn yaml<T: Serialize + ?Sized>(doc: &T) -> Result<String, yaml_serde::Error> {
    yaml_serde::to_string(&Rounded::new(doc))
}

/// A value serialised with every float below it rounded for the field it sits in.
struct Rounded<'a, T: ?Sized> {
    v: &'a T,
    u: Unit,
}

impl<'a, T: ?Sized> Rounded<'a, T> {
    fn new(v: &'a T) -> Self {
        Rounded { v, u: Unit::Plain }
    }
}

impl<T: Serialize + ?Sized> Serialize for Rounded<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.v.serialize(Ser { s, u: self.u })
    }
}

/// The wrapped serializer: floats rounded, structure passed through, the unit chosen again
/// at every struct field and map key.
struct Ser<S> {
    s: S,
    u: Unit,
}

/// A sequence, tuple, map or struct being written.
struct Compound<C> {
    c: C,
    u: Unit,
    /// Unit of the next map value, from its key.
    next: Unit,
}

impl<C> Compound<C> {
    fn new(c: C, u: Unit) -> Self {
        Compound {
            c,
            u,
            next: Unit::Plain,
        }
    }
}

macro_rules! forward {
    ($($f:ident($t:ty)),* $(,)?) => {$(
        fn $f(self, v: $t) -> Result<S::Ok, S::Error> {
            self.s.$f(v)
        }
    )*};
}

impl<S: Serializer> Serializer for Ser<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Compound<S::SerializeSeq>;
    type SerializeTuple = Compound<S::SerializeTuple>;
    type SerializeTupleStruct = Compound<S::SerializeTupleStruct>;
    type SerializeTupleVariant = Compound<S::SerializeTupleVariant>;
    type SerializeMap = Compound<S::SerializeMap>;
    type SerializeStruct = Compound<S::SerializeStruct>;
    type SerializeStructVariant = Compound<S::SerializeStructVariant>;

    forward!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
        serialize_unit_struct(&'static str),
    );

    fn serialize_f32(self, v: f32) -> Result<S::Ok, S::Error> {
        match self.u {
            Unit::Plain => self.s.serialize_f32(v),
            u => self.s.serialize_f64(round(f64::from(v), u)),
        }
    }
    fn serialize_f64(self, v: f64) -> Result<S::Ok, S::Error> {
        self.s.serialize_f64(round(v, self.u))
    }
    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.s.serialize_none()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<S::Ok, S::Error> {
        self.s.serialize_some(&Rounded { v, u: self.u })
    }
    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.s.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.s.serialize_unit_variant(name, index, variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.s
            .serialize_newtype_struct(name, &Rounded { v, u: self.u })
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.s
            .serialize_newtype_variant(name, index, variant, &Rounded { v, u: self.u })
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        Ok(Compound::new(self.s.serialize_seq(len)?, self.u))
    }
    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        Ok(Compound::new(self.s.serialize_tuple(len)?, self.u))
    }
    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        Ok(Compound::new(
            self.s.serialize_tuple_struct(name, len)?,
            self.u,
        ))
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        let c = self.s.serialize_tuple_variant(name, index, variant, len)?;
        Ok(Compound::new(c, self.u))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        Ok(Compound::new(self.s.serialize_map(len)?, Unit::Plain))
    }
    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        Ok(Compound::new(
            self.s.serialize_struct(name, len)?,
            Unit::Plain,
        ))
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        let c = self.s.serialize_struct_variant(name, index, variant, len)?;
        Ok(Compound::new(c, Unit::Plain))
    }
    fn is_human_readable(&self) -> bool {
        self.s.is_human_readable()
    }
}

/// Elements of sequences and tuples keep the unit of the field that holds them.
macro_rules! elements {
    ($tr:ident, $f:ident) => {
        impl<C: ser::$tr> ser::$tr for Compound<C> {
            type Ok = C::Ok;
            type Error = C::Error;
            fn $f<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), C::Error> {
                self.c.$f(&Rounded { v, u: self.u })
            }
            fn end(self) -> Result<C::Ok, C::Error> {
                self.c.end()
            }
        }
    };
}
elements!(SerializeSeq, serialize_element);
elements!(SerializeTuple, serialize_element);
elements!(SerializeTupleStruct, serialize_field);
elements!(SerializeTupleVariant, serialize_field);

/// Fields of structs take the unit their name says.
macro_rules! fields {
    ($tr:ident) => {
        impl<C: ser::$tr> ser::$tr for Compound<C> {
            type Ok = C::Ok;
            type Error = C::Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                v: &T,
            ) -> Result<(), C::Error> {
                self.c.serialize_field(key, &Rounded { v, u: unit_of(key) })
            }
            fn end(self) -> Result<C::Ok, C::Error> {
                self.c.end()
            }
        }
    };
}
fields!(SerializeStruct);
fields!(SerializeStructVariant);

impl<C: ser::SerializeMap> ser::SerializeMap for Compound<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<(), C::Error> {
        self.next = match serde_json::to_value(k) {
            Ok(serde_json::Value::String(s)) => unit_of(&s),
            _ => Unit::Plain,
        };
        self.c.serialize_key(k)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), C::Error> {
        self.c.serialize_value(&Rounded { v, u: self.next })
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.c.end()
    }
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
    fn floats_rounded_by_field_name_at_any_depth() {
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
        let mut m = BTreeMap::new();
        m.insert("alpha_us", 1.2345);
        m.insert("other", 1.2345);
        let v: serde_json::Value = serde_json::from_str(&json(&(r, m)).unwrap()).unwrap();
        assert_eq!(
            v,
            serde_json::json!([{
                "time_us": 4428.29, "busbw_gbps": 370.8, "points_us": [1.23, 5.68],
                "bw_intra": 0.24, "ratio": 1.23456, "bytes": 1u64 << 40,
                "inner": {"lat_us": 0.0, "plain": 0.333333}
            }, {"alpha_us": 1.23, "other": 1.2345}])
        );
        let text = json(&Inner {
            lat_us: -0.001,
            plain: 1.0,
        })
        .unwrap();
        assert!(text.contains("\"lat_us\": 0.0"), "{text}");
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
        let pretty = serde_json::to_string_pretty(&vec![BTreeMap::from([("a", vec![1, 2])])]);
        assert_eq!(
            json(&vec![BTreeMap::from([("a", vec![1, 2])])]).unwrap(),
            pretty.unwrap() + "\n"
        );
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
            times_us: Vec<f64>,
        }
        let doc = Doc {
            name: "a\nb",
            inner: Inner {
                lat_us: 12.3456,
                plain: 0.5,
            },
            list: vec![vec![1, 2], vec![], vec![3]],
            empty: vec![],
            times_us: vec![1.23456, 2.0],
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
                items_to(&mut p, "list", run).unwrap();
                o.array_piece(&p).unwrap();
                o.array_piece(&[]).unwrap();
            }
            o.array_end().unwrap();
            o.array_start("empty").unwrap();
            o.array_end().unwrap();
            // Rounded by the field's name, as inside the struct.
            let mut p = vec![];
            items_to(&mut p, "times_us", &doc.times_us).unwrap();
            o.array_start("times_us").unwrap();
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

    #[test]
    fn yaml_is_rounded_too() {
        let y = yaml(&Inner {
            lat_us: 12.3456,
            plain: 0.5,
        })
        .unwrap();
        assert_eq!(y, "lat_us: 12.35\nplain: 0.5\n");
    }
}
