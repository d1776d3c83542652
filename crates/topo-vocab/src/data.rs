//! Element types and reduction operators, with nccl-tests' names.

/// Element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    F32,
    F64,
    F16,
    Bf16,
    I32,
    I64,
    U8,
}

impl DataType {
    pub const ALL: [DataType; 7] = [
        DataType::F32,
        DataType::F64,
        DataType::F16,
        DataType::Bf16,
        DataType::I32,
        DataType::I64,
        DataType::U8,
    ];

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            DataType::F32 | DataType::I32 => 4,
            DataType::F64 | DataType::I64 => 8,
            DataType::F16 | DataType::Bf16 => 2,
            DataType::U8 => 1,
        }
    }

    /// nccl-tests' name (`float`, `double`, `half`, `bfloat16`, `int32`, `int64`, `uint8`).
    pub fn name(self) -> &'static str {
        match self {
            DataType::F32 => "float",
            DataType::F64 => "double",
            DataType::F16 => "half",
            DataType::Bf16 => "bfloat16",
            DataType::I32 => "int32",
            DataType::I64 => "int64",
            DataType::U8 => "uint8",
        }
    }

    /// The short name documents carry (`f32`, `bf16`).
    pub fn short_name(self) -> &'static str {
        match self {
            DataType::F32 => "f32",
            DataType::F64 => "f64",
            DataType::F16 => "f16",
            DataType::Bf16 => "bf16",
            DataType::I32 => "i32",
            DataType::I64 => "i64",
            DataType::U8 => "u8",
        }
    }

    /// nccl-tests' names and the short forms (`f32`, `float32`, `fp16`, `bf16`, ...).
    pub fn parse(s: &str) -> Option<DataType> {
        Some(match s.to_ascii_lowercase().as_str() {
            "float" | "f32" | "float32" | "fp32" => DataType::F32,
            "double" | "f64" | "float64" | "fp64" => DataType::F64,
            "half" | "f16" | "float16" | "fp16" => DataType::F16,
            "bfloat16" | "bf16" => DataType::Bf16,
            "int32" | "i32" | "int" => DataType::I32,
            "int64" | "i64" => DataType::I64,
            "uint8" | "u8" => DataType::U8,
            _ => return None,
        })
    }
}

/// Reduction operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reduction {
    Sum,
    Prod,
    Min,
    Max,
    Avg,
}

impl Reduction {
    pub const ALL: [Reduction; 5] = [
        Reduction::Sum,
        Reduction::Prod,
        Reduction::Min,
        Reduction::Max,
        Reduction::Avg,
    ];

    /// nccl-tests' name.
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Prod => "prod",
            Reduction::Min => "min",
            Reduction::Max => "max",
            Reduction::Avg => "avg",
        }
    }

    /// A name, any case.
    pub fn parse(s: &str) -> Option<Reduction> {
        Reduction::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in DataType::ALL {
            assert_eq!(DataType::parse(d.name()), Some(d));
            assert_eq!(DataType::parse(d.short_name()), Some(d));
        }
        for o in Reduction::ALL {
            assert_eq!(Reduction::parse(o.name()), Some(o));
            assert_eq!(Reduction::parse(&o.name().to_uppercase()), Some(o));
        }
        assert_eq!(DataType::parse("fp16"), Some(DataType::F16));
        assert_eq!(Reduction::parse("bogus"), None);
    }
}
