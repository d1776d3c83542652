//! Collective operations and nccl-tests' arithmetic on them.

/// A collective. Declaration order is NCCL's tuning-function index order (ties and tables
/// follow it); AllToAll and SendRecv are built from point-to-point operations and are not in
/// NCCL's tuning tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Collective {
    Broadcast,
    Reduce,
    AllGather,
    ReduceScatter,
    AllReduce,
    AllToAll,
    SendRecv,
}

impl Collective {
    /// Every collective, in NCCL's index order.
    pub const ALL: [Collective; 7] = [
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllReduce,
        Collective::AllToAll,
        Collective::SendRecv,
    ];

    /// NCCL's tuning functions, in index order.
    pub const TUNED: [Collective; 5] = [
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllReduce,
    ];

    /// The order `--collective all` runs them in (nccl-tests' usual order).
    pub const RUN_ORDER: [Collective; 7] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllToAll,
        Collective::SendRecv,
    ];

    /// NCCL's printed name (`AllReduce`).
    pub fn name(self) -> &'static str {
        match self {
            Collective::Broadcast => "Broadcast",
            Collective::Reduce => "Reduce",
            Collective::AllGather => "AllGather",
            Collective::ReduceScatter => "ReduceScatter",
            Collective::AllReduce => "AllReduce",
            Collective::AllToAll => "AllToAll",
            Collective::SendRecv => "SendRecv",
        }
    }

    /// The command-line and document name (`allreduce`), also nccl-tests' binary stem.
    pub fn cli_name(self) -> &'static str {
        match self {
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::AllGather => "allgather",
            Collective::ReduceScatter => "reducescatter",
            Collective::AllReduce => "allreduce",
            Collective::AllToAll => "alltoall",
            Collective::SendRecv => "sendrecv",
        }
    }

    /// Accepts `allreduce`, `all_reduce`, `AllReduce`, `all-reduce`, and `bcast`.
    pub fn parse(s: &str) -> Option<Collective> {
        let k: String = s
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect::<String>()
            .to_ascii_lowercase();
        if k == "bcast" {
            return Some(Collective::Broadcast);
        }
        Collective::ALL.into_iter().find(|f| f.cli_name() == k)
    }

    /// Whether NCCL's tuning tables cover it.
    pub fn is_tuned(self) -> bool {
        !matches!(self, Collective::AllToAll | Collective::SendRecv)
    }

    /// Whether the collective combines values with a reduction operator.
    pub fn reduces(self) -> bool {
        matches!(
            self,
            Collective::AllReduce | Collective::ReduceScatter | Collective::Reduce
        )
    }

    /// Whether the collective has a root rank.
    pub fn rooted(self) -> bool {
        matches!(self, Collective::Broadcast | Collective::Reduce)
    }

    /// Whether an in-place form exists (NCCL's aliasing rules); AlltoAll and SendRecv have
    /// none here.
    pub fn has_in_place(self) -> bool {
        !matches!(self, Collective::AllToAll | Collective::SendRecv)
    }

    /// nccl-tests `busbw = algbw x factor` for `n` ranks; see [`bus_factor`].
    pub fn bus_factor(self, n: usize) -> f64 {
        bus_factor(self, n)
    }

    /// Elements in the send buffer and in the receive buffer for a `count` (nccl-tests'
    /// count column).
    pub fn buffer_elems(self, count: usize, n: usize) -> (usize, usize) {
        match self {
            Collective::AllReduce
            | Collective::Broadcast
            | Collective::Reduce
            | Collective::SendRecv => (count, count),
            Collective::AllGather => (count, count * n),
            Collective::ReduceScatter => (count * n, count),
            Collective::AllToAll => (count * n, count * n),
        }
    }

    /// nccl-tests `size` column (bytes) for a count: per-rank buffer, or the total for
    /// allgather (output), reducescatter (input) and alltoall.
    pub fn size_bytes(self, count: usize, n: usize, elem: usize) -> usize {
        let (s, r) = self.buffer_elems(count, n);
        s.max(r) * elem
    }

    /// nccl-tests count for a `size` in bytes (per-block counts are whole elements).
    pub fn count_for_size(self, bytes: usize, n: usize, elem: usize) -> usize {
        match self {
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => {
                bytes / elem / n
            }
            _ => bytes / elem,
        }
    }
}

/// nccl-tests' bus-bandwidth factor for `nranks` ranks (`busbw = algbw x factor`), the one
/// both the model's predictions and the runtime's measurements are reported with.
pub fn bus_factor(c: Collective, nranks: usize) -> f64 {
    let n = nranks.max(1) as f64;
    match c {
        Collective::AllReduce => 2.0 * (n - 1.0) / n,
        Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => (n - 1.0) / n,
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for c in Collective::ALL {
            assert_eq!(Collective::parse(c.name()), Some(c));
            assert_eq!(Collective::parse(c.cli_name()), Some(c));
        }
        assert_eq!(Collective::parse("all_reduce"), Some(Collective::AllReduce));
        assert_eq!(Collective::parse("bcast"), Some(Collective::Broadcast));
        assert_eq!(Collective::parse("bogus"), None);
        let mut run = Collective::RUN_ORDER;
        run.sort();
        assert_eq!(run, Collective::ALL);
        assert!(Collective::TUNED.iter().all(|c| c.is_tuned()));
    }

    #[test]
    fn bus_factors_are_nccl_tests() {
        assert_eq!(bus_factor(Collective::AllReduce, 8), 1.75);
        assert_eq!(bus_factor(Collective::AllGather, 8), 0.875);
        assert_eq!(bus_factor(Collective::ReduceScatter, 16), 15.0 / 16.0);
        assert_eq!(bus_factor(Collective::AllToAll, 4), 0.75);
        assert_eq!(bus_factor(Collective::Broadcast, 8), 1.0);
        assert_eq!(bus_factor(Collective::SendRecv, 8), 1.0);
        assert_eq!(bus_factor(Collective::AllReduce, 0), 0.0);
    }

    #[test]
    fn sizes_follow_nccl_tests() {
        let c = Collective::AllGather;
        assert_eq!(c.buffer_elems(4, 8), (4, 32));
        assert_eq!(c.size_bytes(4, 8, 4), 128);
        assert_eq!(c.count_for_size(128, 8, 4), 4);
    }
}
