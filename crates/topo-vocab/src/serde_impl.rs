//! Serialize and Deserialize as the names topo's documents carried before these types
//! existed (derived field names, lowercase where the derive renamed them).

use crate::{
    Algorithm, Code, Collective, DataType, Fabric, PathType, Protocol, Reduction, Severity,
    Transport,
};
use serde::de::{Deserializer, Error, Unexpected};
use serde::{Deserialize, Serialize, Serializer};
use std::borrow::Cow;

fn algorithm_name(a: Algorithm) -> &'static str {
    match a {
        Algorithm::Tree => "Tree",
        Algorithm::Ring => "Ring",
        Algorithm::CollnetDirect => "CollnetDirect",
        Algorithm::CollnetChain => "CollnetChain",
        Algorithm::Nvls => "Nvls",
        Algorithm::NvlsTree => "NvlsTree",
        Algorithm::Pat => "Pat",
        Algorithm::Direct => "Direct",
    }
}

/// A unit enum as one of a fixed set of names.
macro_rules! by_name {
    ($t:ty, $all:expr, $name:expr) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($name(*self))
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = Cow::<str>::deserialize(d)?;
                $all.into_iter()
                    .find(|v| $name(*v) == s)
                    .ok_or_else(|| D::Error::invalid_value(Unexpected::Str(&s), &stringify!($t)))
            }
        }
    };
}

/// Every algorithm: NCCL's, then the host runtime's own.
fn algorithms() -> impl Iterator<Item = Algorithm> {
    Algorithm::ALL.into_iter().chain([Algorithm::Direct])
}

by_name!(Collective, Collective::ALL, Collective::cli_name);
by_name!(Algorithm, algorithms(), algorithm_name);
by_name!(Protocol, Protocol::ALL, Protocol::name);
by_name!(DataType, DataType::ALL, DataType::short_name);
by_name!(Reduction, Reduction::ALL, Reduction::name);
by_name!(Code, Code::ALL.iter().copied(), Code::name);
by_name!(Severity, Severity::ALL.iter().copied(), Severity::name);
by_name!(Fabric, Fabric::ALL, Fabric::name);
by_name!(PathType, PathType::ALL, PathType::name);

/// For `#[serde(serialize_with)]`: a value by its printed name where a document carries
/// that rather than the type's serde name (a plan row's `algo: "NVLSTree"`).
pub fn printed<T: std::fmt::Display, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// For `#[serde(with = "topo_vocab::macro_name")]`: an algorithm or protocol as the suffix
/// of NCCL's constant (`RING`, `NVLS_TREE`, `SIMPLE`), the form `topo.verify/v1` carries.
pub mod macro_name {
    use crate::{Algorithm, Protocol};
    use serde::de::{Deserializer, Error, Unexpected};
    use serde::{Deserialize, Serializer};
    use std::borrow::Cow;

    /// The types NCCL names by a `NCCL_ALGO_*` / `NCCL_PROTO_*` constant.
    pub trait MacroName: Sized + Copy {
        fn macro_name(self) -> &'static str;
        fn from_macro_name(s: &str) -> Option<Self>;
    }

    impl MacroName for Algorithm {
        fn macro_name(self) -> &'static str {
            Algorithm::macro_name(self)
        }
        fn from_macro_name(s: &str) -> Option<Self> {
            Algorithm::parse(s)
        }
    }

    impl MacroName for Protocol {
        fn macro_name(self) -> &'static str {
            Protocol::macro_name(self)
        }
        fn from_macro_name(s: &str) -> Option<Self> {
            Protocol::from_name(s)
        }
    }

    pub fn serialize<T: MacroName, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.macro_name())
    }

    pub fn deserialize<'de, T: MacroName, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let s = Cow::<str>::deserialize(d)?;
        T::from_macro_name(&s)
            .ok_or_else(|| D::Error::invalid_value(Unexpected::Str(&s), &"an NCCL macro name"))
    }
}

/// For `#[serde(with = "topo_vocab::nccl_tests_name")]`: a data type by nccl-tests' name
/// (`float`, `bfloat16`) rather than the short serde name (`f32`).
pub mod nccl_tests_name {
    use crate::DataType;
    use serde::de::{Deserializer, Error, Unexpected};
    use serde::{Deserialize, Serializer};
    use std::borrow::Cow;

    pub fn serialize<S: Serializer>(v: &DataType, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(v.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DataType, D::Error> {
        let s = Cow::<str>::deserialize(d)?;
        DataType::parse(&s)
            .ok_or_else(|| D::Error::invalid_value(Unexpected::Str(&s), &"an nccl-tests type"))
    }
}

impl Serialize for Transport {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Transport {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Transport::parse(&Cow::<str>::deserialize(d)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::IntoDeserializer;
    use serde::de::value::{Error as DeError, StrDeserializer};

    fn back<'a, T: Deserialize<'a>>(s: &'a str) -> T {
        let d: StrDeserializer<'a, DeError> = s.into_deserializer();
        T::deserialize(d).unwrap()
    }

    #[test]
    fn names_deserialize() {
        for a in algorithms() {
            assert_eq!(back::<Algorithm>(algorithm_name(a)), a);
        }
        for c in Collective::ALL {
            assert_eq!(back::<Collective>(c.cli_name()), c);
        }
        assert_eq!(back::<Protocol>("Simple"), Protocol::Simple);
        assert_eq!(back::<DataType>("bf16"), DataType::Bf16);
        assert_eq!(back::<Reduction>("avg"), Reduction::Avg);
        assert_eq!(back::<Transport>("NET/IB"), Transport::Net(crate::Net::Ib));
        for p in PathType::ALL {
            assert_eq!(back::<PathType>(p.name()), p);
        }
    }

    #[test]
    fn macro_and_nccl_tests_names_deserialize() {
        let d = |s: &'static str| -> StrDeserializer<'static, DeError> { s.into_deserializer() };
        let a: Algorithm = macro_name::deserialize(d("NVLS_TREE")).unwrap();
        assert_eq!(a, Algorithm::NvlsTree);
        let p: Protocol = macro_name::deserialize(d("SIMPLE")).unwrap();
        assert_eq!(p, Protocol::Simple);
        assert_eq!(
            nccl_tests_name::deserialize(d("bfloat16")).unwrap(),
            DataType::Bf16
        );
        assert!(macro_name::deserialize::<Algorithm, _>(d("nope")).is_err());
    }
}
