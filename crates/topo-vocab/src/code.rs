//! The codes topo's documents carry on each finding: one enum, so a code is named once and
//! matched as a value, never as text. Each keeps the name it is printed with and the
//! severities it may be raised at (the first is its usual one); docs/codes.md gives every
//! code's severity and meaning, and a test holds the two equal row by row.

use crate::Severity;

/// Declares [`Code`] with each variant's printed name and its severities.
macro_rules! codes {
    ($($variant:ident => $name:literal [$($sev:ident),+],)*) => {
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

            /// The severities the code may be raised at, its usual one first. One table for
            /// every command: a finding takes its severity from here, and one raised at a
            /// severity not listed is a defect (`Severity` checks it in debug builds).
            pub const fn severities(self) -> &'static [Severity] {
                match self {
                    $(Code::$variant => &[$(Severity::$sev),+],)*
                }
            }
        }
    };
}

codes! {
    GpuNone => "gpu-none" [Info],
    NvlinkUnknown => "nvlink-unknown" [Warning],
    NvswitchFull => "nvswitch-full" [Info],
    NvlinkNone => "nvlink-none" [Info],
    NvlinkAllDirect => "nvlink-all-direct" [Info],
    NvlinkMesh => "nvlink-mesh" [Info],
    NvlinkIslands => "nvlink-islands" [Warning],
    P2pDenied => "p2p-denied" [Warning],
    NvlinkFabric => "nvlink-fabric" [Info],
    NvlinkFabricPartial => "nvlink-fabric-partial" [Warning],
    NvlinkDomain => "nvlink-domain" [Info],
    NicRailAligned => "nic-rail-aligned" [Info],
    NicPerGpu => "nic-per-gpu" [Info],
    NicShared => "nic-shared" [Info],
    NicMixed => "nic-mixed" [Info],
    NicNoneNear => "nic-none-near" [Warning],
    NicMissing => "nic-missing" [Warning],
    NicNumaRemote => "nic-numa-remote" [Warning],
    NicPciOnly => "nic-pci-only" [Info],
    GdrUnavailable => "gdr-unavailable" [Warning],
    NetworkTotal => "network-total" [Info],
    NetworkNone => "network-none" [Info],
    NetworkUnknown => "network-unknown" [Info],
    NumaSpan => "numa-span" [Info],
    VirtualizedTopology => "virtualized-topology" [Warning, Info],
    PcieDowntrained => "pcie-downtrained" [Warning, Info, Error],
    PcieUpstreamSlower => "pcie-upstream-slower" [Warning],
    SourceWarning => "source-warning" [Warning],
    NetSocketSpeed => "net-socket-speed" [Warning],
    NetNone => "net-none" [Warning],
    NcclInitFails => "nccl-init-fails" [Error],
    HostsNvlsDiffer => "hosts-nvls-differ" [Warning],
    HostsCpuDiffer => "hosts-cpu-differ" [Warning, Info],
    HostsNicsDiffer => "hosts-nics-differ" [Warning],
    HostsGpusDiffer => "hosts-gpus-differ" [Info],
    HostsSmDiffer => "hosts-sm-differ" [Info, Warning],
    HostsP2pChannelsDiffer => "hosts-p2p-channels-differ" [Warning],
    HostsChoicesDiffer => "hosts-choices-differ" [Error],
    P2pAssumed => "p2p-assumed" [Warning],
    P2pRefusedByDriver => "p2p-refused-by-driver" [Warning],
    NvlsUnavailable => "nvls-unavailable" [Warning, Info],
    VmGpuLinkSlow => "vm-gpu-link-slow" [Warning],
    VmNumaUnknown => "vm-numa-unknown" [Info],
    VmCaused => "vm-caused" [Info, Warning],
    NetGdrUnknown => "net-gdr-unknown" [Warning],
    NetSpeedUnknown => "net-speed-unknown" [Warning],
    EnvUnknown => "env-unknown" [Warning],
    ShmOnNvlink => "shm-on-nvlink" [Warning],
    NetOnNvlink => "net-on-nvlink" [Warning],
    P2pPeerInvisible => "p2p-peer-invisible" [Warning],
    P2pDisabledByEnv => "p2p-disabled-by-env" [Error],
    P2pRefused => "p2p-refused" [Warning],
    SingleGpuVisible => "single-gpu-visible" [Error, Warning],
    RanksOnSeparateHosts => "ranks-on-separate-hosts" [Error, Warning],
    P2pPathTooFar => "p2p-path-too-far" [Warning],
    AcsRedirect => "acs-redirect" [Error],
    IommuTranslation => "iommu-translation" [Warning],
    FabricManagerNotReady => "fabric-manager-not-ready" [Error],
    NvlinkDegraded => "nvlink-degraded" [Error, Warning],
    NvlsRequestedUnavailable => "nvls-requested-unavailable" [Error],
    P2pDisabledNvlink => "p2p-disabled-nvlink" [Error],
    P2pDisabledPcie => "p2p-disabled-pcie" [Info],
    LogDiffersFromPlan => "log-differs-from-plan" [Warning],
    NcclTestsBelowBand => "nccl-tests-below-band" [Error, Warning],
    NcclTestsInBand => "nccl-tests-in-band" [Info],
    NcclTestsNotJudged => "nccl-tests-not-judged" [Info],
    NcclTestsWrongResults => "nccl-tests-wrong-results" [Error],
    MigEnabled => "mig-enabled" [Error],
    ShmTooSmall => "shm-too-small" [Warning],
    RailMisaligned => "rail-misaligned" [Warning],
    UnknownNcclVariable => "unknown-nccl-variable" [Warning, Info],
    TransportDiffersFromPlan => "transport-differs-from-plan" [Warning],
    DeviceMissing => "device-missing" [Error],
    NumaMismatch => "numa-mismatch" [Warning],
    NcclWarning => "nccl-warning" [Warning],
    NvlsSetupFailed => "nvls-setup-failed" [Error],
    ShmExhausted => "shm-exhausted" [Error],
    ShmAttachFailed => "shm-attach-failed" [Error],
    PciSysfsMissing => "pci-sysfs-missing" [Error],
    CudaMempoolUnsupported => "cuda-mempool-unsupported" [Error],
    CudaIpcUnsupported => "cuda-ipc-unsupported" [Error],
    IbDeviceOpenFailed => "ib-device-open-failed" [Error],
    SocketFamilyError => "socket-family-error" [Error],
    IbVerbsMissing => "ibverbs-missing" [Warning, Info],
    IbNoDevice => "ib-no-device" [Warning, Info],
    DriverOlderThanCuda => "driver-older-than-cuda" [Error],
    SharedMemExceeded => "shared-mem-exceeded" [Error],
    SocketOnLoopback => "socket-on-loopback" [Error, Warning, Info],
    GdrDistance => "gdr-distance" [Warning, Info],
    GdrReadOff => "gdr-read-off" [Info],
    ShmPciePath => "shm-pcie-path" [Info],
    LogNoFailure => "log-no-failure" [Info],
    SocketInterfaceMissing => "socket-interface-missing" [Error],
    PeerConnectionLost => "peer-connection-lost" [Error],
    CudaOutOfMemory => "cuda-out-of-memory" [Error],
    IbCompletionError => "ib-completion-error" [Error],
    NcclTestsImpossibleRows => "nccl-tests-impossible-rows" [Error],
    HangRankMissing => "hang-rank-missing" [Error],
    HangRankSilent => "hang-rank-silent" [Warning],
    HangRankDead => "hang-rank-dead" [Error],
    HangRankError => "hang-rank-error" [Error],
    HangDesync => "hang-desync" [Error],
    HangNetworkFault => "hang-network-fault" [Error],
    HangNetFirstUse => "hang-net-first-use" [Error],
    HangConcurrentUse => "hang-concurrent-use" [Warning],
    HangStuckInTransfer => "hang-stuck-in-transfer" [Error],
    HangCollectiveTimeout => "hang-collective-timeout" [Warning],
    HangWatchdogStuck => "hang-watchdog-stuck" [Warning],
    HangRasMismatch => "hang-ras-mismatch" [Warning],
    HangRasTeardown => "hang-ras-teardown" [Info],
    HangRasInconsistent => "hang-ras-inconsistent" [Warning],
    NcclTestsRanksDisagree => "nccl-tests-ranks-disagree" [Warning],
    NcclTestsSettingIgnored => "nccl-tests-setting-ignored" [Warning],
    TopologyFlattened => "topology-flattened" [Warning],
    NetNotModelled => "net-not-modelled" [Warning],
    SocketInterfaces => "socket-interfaces" [Info, Warning],
    NcclTestsSizeFromCount => "nccl-tests-size-from-count" [Warning],
    NvlinkOutside => "nvlink-outside" [Warning],
    NicFused => "nic-fused" [Info],
}

impl Code {
    /// The severity the code is usually raised at.
    pub const fn severity(self) -> Severity {
        self.severities()[0]
    }

    /// Whether the code may be raised at `s`.
    pub fn allows(self, s: Severity) -> bool {
        self.severities().contains(&s)
    }

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
