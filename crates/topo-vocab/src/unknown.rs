//! Reading a word of the vocabulary with `str::parse` (`FromStr`): the command line's value
//! parsers and the readers of documents and logs call the same grammar as the types' own
//! `parse`/`from_name`, and get back which word was not one.

use std::fmt;
use std::str::FromStr;

use crate::{Algorithm, Collective, DataType, Protocol, Reduction};

/// A word that names no value of the type: what was asked (`collective`) and the word given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    pub what: &'static str,
    pub given: String,
}

impl fmt::Display for Unknown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} '{}'", self.what, self.given)
    }
}

impl std::error::Error for Unknown {}

fn read<T>(s: &str, what: &'static str, parse: fn(&str) -> Option<T>) -> Result<T, Unknown> {
    parse(s).ok_or_else(|| Unknown {
        what,
        given: s.to_string(),
    })
}

/// [`Collective::parse`]: `allreduce`, `all_reduce`, `AllReduce`, `bcast`.
impl FromStr for Collective {
    type Err = Unknown;
    fn from_str(s: &str) -> Result<Self, Unknown> {
        read(s, "collective", Collective::parse)
    }
}

/// [`Algorithm::parse`]: the command line's names (`ring`, `nvls-tree`, `direct`).
impl FromStr for Algorithm {
    type Err = Unknown;
    fn from_str(s: &str) -> Result<Self, Unknown> {
        read(s, "algorithm", Algorithm::parse)
    }
}

/// [`Protocol::from_name`]: `simple`, `LL`, `ll128`, any case.
impl FromStr for Protocol {
    type Err = Unknown;
    fn from_str(s: &str) -> Result<Self, Unknown> {
        read(s, "protocol", Protocol::from_name)
    }
}

/// [`DataType::parse`]: nccl-tests' names and the short forms.
impl FromStr for DataType {
    type Err = Unknown;
    fn from_str(s: &str) -> Result<Self, Unknown> {
        read(s, "data type", DataType::parse)
    }
}

/// [`Reduction::parse`]: `sum`, `prod`, `min`, `max`, `avg`, any case.
impl FromStr for Reduction {
    type Err = Unknown;
    fn from_str(s: &str) -> Result<Self, Unknown> {
        read(s, "reduction", Reduction::parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_parse_as_the_types_grammar_and_name_what_is_not_one() {
        assert_eq!("all_reduce".parse(), Ok(Collective::AllReduce));
        assert_eq!("nvls-tree".parse(), Ok(Algorithm::NvlsTree));
        assert_eq!("LL128".parse(), Ok(Protocol::Ll128));
        assert_eq!("fp16".parse(), Ok(DataType::F16));
        assert_eq!("AVG".parse(), Ok(Reduction::Avg));
        let e = "gather".parse::<Collective>().unwrap_err();
        assert_eq!(e.to_string(), "unknown collective 'gather'");
        assert!("float8".parse::<DataType>().is_err());
        assert!("xor".parse::<Reduction>().is_err());
        assert!("bogus".parse::<Algorithm>().is_err());
    }
}
