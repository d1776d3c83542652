//! The catalogue against NCCL's lines: each signature matches the lines of the public threads
//! it was written from, every WARN of the corpus is known, and docs/diagnose.md renders it.

use super::*;
use crate::corpus_tests::log_dirs;
use crate::{Report, Severity};
use topo_evidence::nccllog;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/diagnose.md");

fn report(text: &str) -> Report {
    let log = nccllog::parse(text);
    crate::diagnose(&crate::Input {
        logs: vec![LogInput {
            name: "x".into(),
            log: &log,
        }],
        ..Default::default()
    })
}

fn code_of(line: &str) -> Vec<Code> {
    CATALOGUE
        .iter()
        .filter(|s| s.matches(line))
        .map(|s| s.code)
        .collect()
}

#[test]
fn each_signature_matches_its_threads_line_and_no_other() {
    let cases = [
        (
            "node004:27907:27907 [1] transport/nvls.cc:254 NCCL WARN Cuda failure 401 'the operation cannot be performed in the present state'",
            Code::NvlsSetupFailed,
        ),
        (
            "gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
            Code::ShmExhausted,
        ),
        (
            "a100-8:1:1 [0] misc/shmutils.cc:129 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl- (size 192814336), error: No such file or directory (2)",
            Code::ShmAttachFailed,
        ),
        (
            "D:1:2 [0] graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:21/../../0000:21:00.0",
            Code::PciSysfsMissing,
        ),
        (
            "h:1:2 [0] init.cc:416 NCCL WARN Cuda failure 'operation not supported'",
            Code::CudaMempoolUnsupported,
        ),
        (
            "z:1:2 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between these two devices",
            Code::CudaIpcUnsupported,
        ),
        (
            "t:30:97 [0] transport/net_ib.cc:117 NCCL WARN NET/IB : Unable to open device mlx5_0",
            Code::IbDeviceOpenFailed,
        ),
        (
            "gpu7:4105:4372 [0] include/socket.h:318 NCCL WARN Net : Socket creation failed : Address family not supported by protocol",
            Code::SocketFamilyError,
        ),
        (
            "h:1:2 [0] enqueue.cc:140 NCCL WARN cudaArch 700 ncclMaxSharedMem 101376 exceeds device/fn maxSharedMem 98304",
            Code::SharedMemExceeded,
        ),
        (
            "n:1:1 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
            Code::IbVerbsMissing,
        ),
        (
            "n:1:1 [0] bootstrap.cc:1032 NCCL WARN Bootstrap : no socket interface found",
            Code::SocketInterfaceMissing,
        ),
        (
            "n:1:9 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer n2<40522>",
            Code::PeerConnectionLost,
        ),
        (
            "n:1:9 [3] include/alloc.h:124 NCCL WARN Cuda failure 'out of memory'",
            Code::CudaOutOfMemory,
        ),
        (
            "n:1:9 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<39422> with status=12 opcode=0 len=0 vendor err 129 (Send)",
            Code::IbCompletionError,
        ),
        (
            "n:1:9 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-AbC to 9637892 bytes, error: No space left on device (28)",
            Code::ShmExhausted,
        ),
        (
            "n:1:1 [0] NCCL INFO NET/IB : No device found.",
            Code::IbNoDevice,
        ),
        (
            "n:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0>",
            Code::SocketOnLoopback,
        ),
        (
            "n:1:1 [0] NCCL INFO cudaDriverVersion 11000",
            Code::DriverOlderThanCuda,
        ),
    ];
    for (line, want) in cases {
        // Several may match; the first in the table claims the line.
        assert_eq!(code_of(line).first(), Some(&want), "{line}");
    }
    // An INFO line naming a WARN's words is not that WARN.
    assert!(code_of("n:1:1 [0] NCCL INFO transport/nvls.cc:409 -> 1").is_empty());
}

#[test]
fn every_warn_of_the_corpus_is_in_the_catalogue() {
    let mut unknown = vec![];
    let mut n = 0;
    for e in log_dirs().into_iter().flatten() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.ends_with(".log") || name.ends_with(".txt")) || name.starts_with("synthetic-") {
            continue;
        }
        let log = nccllog::parse(&std::fs::read_to_string(&p).unwrap());
        for w in &log.warnings {
            n += 1;
            if code_of(&w.text).is_empty() && !w.text.contains("P2P is disabled between") {
                unknown.push(format!("{name}:{}: {}", w.line, w.text));
            }
        }
    }
    assert!(n >= 20, "{n} WARN lines");
    assert!(unknown.is_empty(), "{unknown:#?}");
}

#[test]
fn every_code_is_one_signature_and_every_signature_ends_in_a_cause() {
    for (i, s) in CATALOGUE.iter().enumerate() {
        assert!(
            CATALOGUE[i + 1..].iter().all(|o| o.code != s.code),
            "{}",
            s.code
        );
        assert!(!s.causes.is_empty() && !s.versions.is_empty() && !s.source.is_empty());
        let ids: Vec<&str> = s.causes.iter().map(|c| c.id).collect();
        let mut d = ids.clone();
        d.dedup();
        assert_eq!(ids, d, "{}", s.code);
    }
}

#[test]
fn node_count_decides_whether_no_ib_device_matters() {
    let one = "h:1:1 [0] NCCL INFO NET/IB : No device found.\nh:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\n";
    let many = "a:1:1 [0] NCCL INFO NET/IB : No device found.\na:1:1 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0\n";
    let sev = |text: &str| {
        let r = report(text);
        r.findings
            .iter()
            .find(|f| f.code == Code::IbNoDevice)
            .map(|f| f.severity)
    };
    assert_eq!(sev(one), Some(Severity::Info));
    assert_eq!(sev(many), Some(Severity::Warning));
}

#[test]
fn driver_older_than_the_cuda_build_is_an_error_and_newer_is_nothing() {
    let text = |d: u32| {
        format!("h:1:1 [0] NCCL INFO cudaDriverVersion {d}\nNCCL version 2.14.3+cuda11.7\n")
    };
    for (d, want) in [(11000, true), (12020, false)] {
        let r = report(&text(d));
        assert_eq!(r.has(Code::DriverOlderThanCuda), want, "{d}");
    }
}

#[test]
fn the_cause_follows_the_words_of_the_line() {
    let title = |text: &str, code: Code| {
        let r = report(text);
        r.findings
            .iter()
            .find(|f| f.code == code)
            .map(|f| f.text.clone())
            .unwrap_or_default()
    };
    let nvls = |what: &str| {
        format!(
            "h:1:2 [0] transport/nvls.cc:158 NCCL WARN Cuda failure {what}\nNCCL version 2.21.5+cuda12.4\n"
        )
    };
    assert!(
        title(&nvls("1 'invalid argument'"), Code::NvlsSetupFailed)
            .contains("fabric manager was stopped")
    );
    assert!(
        title(&nvls("2 'out of memory'"), Code::NvlsSetupFailed).contains("ran out of GPU memory")
    );
    assert!(
        title(&nvls("999 'unknown error'"), Code::NvlsSetupFailed)
            .contains("do not agree on multicast")
    );
    // Never 'invalid argument' where the line says otherwise.
    assert!(!title(&nvls("2 'out of memory'"), Code::NvlsSetupFailed).contains("invalid argument"));
    let hca = "h:1:1 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_9\nh:1:1 [0] NCCL INFO NET/IB : No device found.\n";
    assert!(title(hca, Code::IbNoDevice).contains("NCCL_IB_HCA"));
    let drv = "h:1:1 [0] init.cc:1000 NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'\n";
    let r = report(drv);
    assert_eq!(
        r.findings[0].code,
        Code::DriverOlderThanCuda,
        "{:?}",
        r.findings
    );
    assert!(!r.has(Code::NcclWarning), "the WARN is explained");
}

#[test]
fn docs_render_the_catalogue() {
    let doc = std::fs::read_to_string(DOC).unwrap();
    let (begin, end) = ("<!-- catalogue:begin -->\n", "<!-- catalogue:end -->");
    let want = markdown();
    if std::env::var_os("TOPO_BLESS").is_some() {
        let a = doc.find(begin).unwrap() + begin.len();
        let b = doc.find(end).unwrap();
        std::fs::write(DOC, format!("{}\n{want}{}", &doc[..a], &doc[b..])).unwrap();
        return;
    }
    let a = doc
        .find(begin)
        .expect("catalogue markers in docs/diagnose.md")
        + begin.len();
    let b = doc.find(end).unwrap();
    assert_eq!(
        doc[a..b].trim(),
        want.trim(),
        "docs/diagnose.md's catalogue differs: rerun with TOPO_BLESS=1"
    );
}
