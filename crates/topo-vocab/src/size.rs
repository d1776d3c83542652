//! Size strings as nccl-tests reads them.

/// Parses a size the way nccl-tests does (`8`, `1K`, `16M`, `4G`, also `1KB`, `1KiB`,
/// lower case): binary multiples. Errors name the string.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    if num.is_empty() {
        return Err(format!(
            "bad size '{s}': expected a number with an optional K, M, G or T suffix"
        ));
    }
    let n: u64 = num
        .parse()
        .map_err(|_| format!("bad size '{s}': number too large"))?;
    let mult: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => 1 << 10,
        "M" | "MB" | "MIB" => 1 << 20,
        "G" | "GB" | "GIB" => 1 << 30,
        "T" | "TB" | "TIB" => 1 << 40,
        _ => {
            return Err(format!(
                "bad size '{s}': unknown suffix '{unit}' (use K, M, G or T)"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("bad size '{s}': too large"))
}

/// `1G`, `256M`, `8K`, `24` (bytes), as nccl-tests users write sizes; a size no binary
/// multiple names exactly, from 1M, to one decimal (`122.0M`).
pub fn size_label(b: u64) -> String {
    for (shift, unit) in [(30, "G"), (20, "M"), (10, "K")] {
        if b >= 1 << shift && b.is_multiple_of(1 << shift) {
            return format!("{}{unit}", b >> shift);
        }
    }
    if b >= 1 << 20 {
        return format!("{:.1}M", b as f64 / (1 << 20) as f64);
    }
    b.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_binary_multiples() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("1K").unwrap(), 1024);
        assert_eq!(parse_size("16M").unwrap(), 16 << 20);
        assert_eq!(parse_size("4g").unwrap(), 4 << 30);
        assert_eq!(parse_size("2KiB").unwrap(), 2048);
        assert_eq!(parse_size(" 3T ").unwrap(), 3 << 40);
        for bad in ["", "K", "1X", "99999999999999999999", "20000000T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
