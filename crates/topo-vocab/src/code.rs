//! The codes topo's documents carry on each verdict, warning, anomaly and finding: one enum,
//! so a code is named once and matched as a value, never as text. Each keeps the name it is
//! printed with; docs/codes.md gives every code's severity and meaning, and a test holds the
//! two lists equal.

/// Declares [`Code`] with each variant's printed name.
macro_rules! codes {
    ($($variant:ident => $name:literal,)*) => {
        /// A stable code a monitoring rule can match (docs/codes.md).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Code {
            $($variant,)*
        }

        impl Code {
            /// Every code, in docs/codes.md's order.
            pub const ALL: &[Code] = &[$(Code::$variant,)*];

            /// The name documents print (`p2p-disabled-by-env`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Code::$variant => $name,)*
                }
            }
        }
    };
}

codes! {
    GpuNone => "gpu-none",
    NvlinkUnknown => "nvlink-unknown",
    NvswitchFull => "nvswitch-full",
    NvlinkNone => "nvlink-none",
    NvlinkAllDirect => "nvlink-all-direct",
    NvlinkMesh => "nvlink-mesh",
    NvlinkIslands => "nvlink-islands",
    P2pDenied => "p2p-denied",
    NvlinkFabric => "nvlink-fabric",
    NvlinkFabricPartial => "nvlink-fabric-partial",
    NvlinkDomain => "nvlink-domain",
    NicRailAligned => "nic-rail-aligned",
    NicPerGpu => "nic-per-gpu",
    NicShared => "nic-shared",
    NicMixed => "nic-mixed",
    NicNoneNear => "nic-none-near",
    NicMissing => "nic-missing",
    NicNumaRemote => "nic-numa-remote",
    NicPciOnly => "nic-pci-only",
    GdrUnavailable => "gdr-unavailable",
    NetworkTotal => "network-total",
    NetworkNone => "network-none",
    NetworkUnknown => "network-unknown",
    NumaSpan => "numa-span",
    VirtualizedTopology => "virtualized-topology",
    PcieDowntrained => "pcie-downtrained",
    PcieUpstreamSlower => "pcie-upstream-slower",
    SourceWarning => "source-warning",
    NetSocketSpeed => "net-socket-speed",
    NetNone => "net-none",
    NcclInitFails => "nccl-init-fails",
    HostsNvlsDiffer => "hosts-nvls-differ",
    HostsCpuDiffer => "hosts-cpu-differ",
    HostsNicsDiffer => "hosts-nics-differ",
    HostsGpusDiffer => "hosts-gpus-differ",
    HostsSmDiffer => "hosts-sm-differ",
    HostsP2pChannelsDiffer => "hosts-p2p-channels-differ",
    HostsChoicesDiffer => "hosts-choices-differ",
    P2pAssumed => "p2p-assumed",
    P2pRefusedByDriver => "p2p-refused-by-driver",
    NvlsUnavailable => "nvls-unavailable",
    VmGpuLinkSlow => "vm-gpu-link-slow",
    VmNumaUnknown => "vm-numa-unknown",
    VmCaused => "vm-caused",
    NetGdrUnknown => "net-gdr-unknown",
    NetSpeedUnknown => "net-speed-unknown",
    EnvUnknown => "env-unknown",
    ShmOnNvlink => "shm-on-nvlink",
    NetOnNvlink => "net-on-nvlink",
    P2pPeerInvisible => "p2p-peer-invisible",
    P2pDisabledByEnv => "p2p-disabled-by-env",
    P2pRefused => "p2p-refused",
    SingleGpuVisible => "single-gpu-visible",
    RanksOnSeparateHosts => "ranks-on-separate-hosts",
    P2pPathTooFar => "p2p-path-too-far",
    AcsRedirect => "acs-redirect",
    IommuTranslation => "iommu-translation",
    FabricManagerNotReady => "fabric-manager-not-ready",
    NvlinkDegraded => "nvlink-degraded",
    NvlsRequestedUnavailable => "nvls-requested-unavailable",
    P2pDisabledNvlink => "p2p-disabled-nvlink",
    P2pDisabledPcie => "p2p-disabled-pcie",
    LogDiffersFromPlan => "log-differs-from-plan",
    NcclTestsBelowBand => "nccl-tests-below-band",
    NcclTestsInBand => "nccl-tests-in-band",
    NcclTestsNotJudged => "nccl-tests-not-judged",
    NcclTestsWrongResults => "nccl-tests-wrong-results",
    MigEnabled => "mig-enabled",
    ShmTooSmall => "shm-too-small",
    RailMisaligned => "rail-misaligned",
    UnknownNcclVariable => "unknown-nccl-variable",
    TransportDiffersFromPlan => "transport-differs-from-plan",
    DeviceMissing => "device-missing",
    NumaMismatch => "numa-mismatch",
    NcclWarning => "nccl-warning",
    HangRankMissing => "hang-rank-missing",
    HangRankSilent => "hang-rank-silent",
    HangRankDead => "hang-rank-dead",
    HangRankError => "hang-rank-error",
    HangDesync => "hang-desync",
    HangNetworkFault => "hang-network-fault",
    HangNetFirstUse => "hang-net-first-use",
    HangConcurrentUse => "hang-concurrent-use",
    HangStuckInTransfer => "hang-stuck-in-transfer",
    HangCollectiveTimeout => "hang-collective-timeout",
    HangWatchdogStuck => "hang-watchdog-stuck",
    HangRasMismatch => "hang-ras-mismatch",
    HangRasTeardown => "hang-ras-teardown",
    HangRasInconsistent => "hang-ras-inconsistent",
}

impl Code {
    /// The code printed as `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.name() == name)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A code equals the name it is printed with (what a script or a test reads back).
impl PartialEq<str> for Code {
    fn eq(&self, other: &str) -> bool {
        self.name() == other
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_kebab_case_and_read_back() {
        let mut names: Vec<&str> = Code::ALL.iter().map(|c| c.name()).collect();
        for (c, n) in Code::ALL.iter().zip(&names) {
            assert_eq!(Code::from_name(n), Some(*c));
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'),
                "{n}"
            );
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Code::ALL.len());
        assert_eq!(Code::from_name("no-such-code"), None);
        assert!(Code::P2pDisabledByEnv == "p2p-disabled-by-env");
    }
}
