//! What NCCL's network errors say: a local HCA event names the host and port where a fault
//! starts; completion errors name both ends of a failing connection; the transport's size
//! check names a desync. Status numbers are `ibv_wc_status` (NCCL's `ibvWcStatusStr`,
//! `src/misc/ibvwrap.cc`); 12 is the transport retry counter exceeded, after
//! NCCL_IB_TIMEOUT x NCCL_IB_RETRY_CNT (about 30 s at the defaults, docs/userguide env.rst).

use super::model::{Acc, Cause, RankKind, Suspect, Why, finding};
use std::collections::BTreeMap;
use topo_evidence::hang::{NetError, NetWhat, Quote};
use topo_vocab::Code;

/// `ibv_wc_status` names (libibverbs `verbs.h`), as NCCL 2.28+ prints them.
fn status_name(s: u32) -> &'static str {
    const NAMES: [&str; 22] = [
        "SUCCESS",
        "LOC_LEN_ERR",
        "LOC_QP_OP_ERR",
        "LOC_EEC_OP_ERR",
        "LOC_PROT_ERR",
        "WR_FLUSH_ERR",
        "MW_BIND_ERR",
        "BAD_RESP_ERR",
        "LOC_ACCESS_ERR",
        "REM_INV_REQ_ERR",
        "REM_ACCESS_ERR",
        "REM_OP_ERR",
        "RETRY_EXC_ERR",
        "RNR_RETRY_EXC_ERR",
        "LOC_RDD_VIOL_ERR",
        "REM_INV_RD_REQ_ERR",
        "REM_ABORT_ERR",
        "INV_EECN_ERR",
        "INV_EEC_STATE_ERR",
        "FATAL_ERR",
        "RESP_TIMEOUT_ERR",
        "GENERAL_ERR",
    ];
    NAMES.get(s as usize).copied().unwrap_or("unknown status")
}

/// `host (GPU d, mlx5_0:1)`: the local end of a line.
fn local(e: &NetError) -> String {
    let mut s = e.host.clone().unwrap_or_else(|| "an unnamed host".into());
    let mut extra = vec![];
    if let Some(d) = e.dev {
        extra.push(format!("GPU {d}"));
    }
    if let Some(h) = &e.hca {
        extra.push(h.clone());
    }
    if !extra.is_empty() {
        s.push_str(&format!(" ({})", extra.join(", ")));
    }
    s
}

fn endpoint(e: &NetError, detail: String) -> Suspect {
    Suspect {
        ranks: vec![],
        rank_kind: RankKind::Global,
        group: None,
        why: Why::NetworkEndpoint,
        detail,
        node: e.host.clone(),
        gpu: e.dev.map(|d| d.to_string()),
        pid: e.pid,
        launcher: None,
    }
}

/// `progress`: whether any other evidence shows a collective completed before the errors.
pub fn judge(errors: &[NetError], progress: bool, acc: &mut Acc) {
    let hca_hosts = async_events(errors, acc);
    completions(errors, progress, &hca_hosts, acc);
    for e in errors {
        match &e.what {
            NetWhat::SizeMismatch {
                peer,
                local: l,
                remote,
            } => {
                let p = peer.clone().unwrap_or_else(|| "its peer".into());
                let title = format!(
                    "NET/IB on {} received {} bytes where peer {p} sent {}: the two ends are in different collectives or sizes",
                    local(e),
                    l.map_or("?".into(), |x| x.to_string()),
                    remote.map_or("?".into(), |x| x.to_string()),
                );
                acc.suspects
                    .push(endpoint(e, format!("size mismatch with peer {p}")));
                acc.place(
                    "link",
                    format!("{} <-> {p}", local(e)),
                    "collective size mismatch between the two ends".to_string(),
                );
                acc.findings.push(finding(Code::HangDesync, title.clone(), &[&e.at], "a desync, not a NIC fault: the ranks on the two hosts called different collectives (or the same with other counts, or runs with different settings): compare their code paths and launch settings"));
                acc.claim(Cause::Desync, 80, title);
            }
            NetWhat::Socket { peer, error } => {
                let p = peer.clone().unwrap_or_else(|| "a peer".into());
                let title = format!("{} lost its connection to {p}: {error}", local(e));
                acc.place("peer", p.clone(), format!("{} saw: {error}", local(e)));
                acc.findings.push(finding(Code::HangNetworkFault, title.clone(), &[&e.at], "a peer that closes its sockets has usually exited or crashed first: read the log of the process at that address; if it is alive, check the path between the hosts"));
                acc.claim(Cause::RankDead, 45, title);
            }
            _ => {}
        }
    }
}

/// Async events that report a change, not a fault (`ibv_event_type_str` names NCCL prints
/// through `ibvwrap.cc`): a port coming up, a GID or LID change, the subnet manager.
fn benign(event: &str) -> bool {
    const CHANGES: [&str; 9] = [
        "port active",
        "GID table change",
        "LID change",
        "P_Key change",
        "PKey change",
        "SM change",
        "client reregistration",
        "communication established",
        "SRQ limit reached",
    ];
    CHANGES.iter().any(|c| event.starts_with(c))
}

/// Local async events, per host and HCA: the place where a fault starts. Returns the hosts.
fn async_events(errors: &[NetError], acc: &mut Acc) -> Vec<String> {
    let mut by: BTreeMap<(String, String, String), Vec<&NetError>> = BTreeMap::new();
    for e in errors {
        if let NetWhat::AsyncEvent { event } = &e.what
            && !benign(event)
        {
            let key = (
                e.host.clone().unwrap_or_default(),
                e.hca.clone().unwrap_or_default(),
                event.clone(),
            );
            by.entry(key).or_default().push(e);
        }
    }
    let mut hosts = vec![];
    for ((host, hca, event), es) in by {
        let mut pids: Vec<u64> = es.iter().filter_map(|e| e.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let who = if pids.len() > 1 {
            format!(", seen by {} processes there", pids.len())
        } else {
            String::new()
        };
        let h = if host.is_empty() {
            "an unnamed host".to_string()
        } else {
            host.clone()
        };
        let port = if hca.is_empty() {
            String::new()
        } else {
            format!(" {hca}")
        };
        let title = format!("{event} on {h}{port}{who}: the fault starts at this host's NIC");
        let fix = if event.contains("catastrophic") {
            "an HCA fatal error: drain the host, check the NIC's health (dmesg mlx5 health/syndrome, mlxfwreset or a reboot, firmware), replace it if it repeats"
        } else if event.contains("port error") || event.contains("port down") {
            "the link went down (a flap): check the cable, transceiver and switch port (ibstat, ethtool -S, the switch's port log)"
        } else if event.contains("access") {
            "a work-queue access error on this HCA: memory registration or GPUDirect RDMA fails there (nvidia-peermem/dma-buf, the IB plugin in use): compare with another net plugin (NCCL_NET_PLUGIN) and check the driver and firmware"
        } else {
            "an asynchronous HCA error: check this NIC's health and link (ibstat, dmesg)"
        };
        let q: Vec<&Quote> = es.iter().map(|e| &e.at).collect();
        acc.suspects.push(endpoint(es[0], event.clone()));
        acc.place("nic", format!("{h}{port}"), event.clone());
        acc.findings
            .push(finding(Code::HangNetworkFault, title.clone(), &q, fix));
        acc.claim(Cause::NetworkFault, 100, title);
        hosts.push(host);
    }
    hosts
}

/// Completion errors, per local end, peer and status.
fn completions(errors: &[NetError], progress: bool, hca_hosts: &[String], acc: &mut Acc) {
    let mut by: BTreeMap<(String, String, u32), Vec<&NetError>> = BTreeMap::new();
    for e in errors {
        if let NetWhat::Completion { status, peer, .. } = &e.what {
            let key = (
                local(e),
                peer.clone().unwrap_or_default(),
                status.unwrap_or(u32::MAX),
            );
            by.entry(key).or_default().push(e);
        }
    }
    for ((here, peer, status), es) in by {
        let name = if status == u32::MAX {
            "unknown status".to_string()
        } else {
            format!("status {status} ({})", status_name(status))
        };
        let vendor = es.iter().find_map(|e| match e.what {
            NetWhat::Completion { vendor_err, .. } => vendor_err,
            _ => None,
        });
        let vendor = vendor
            .map(|v| format!(", vendor err {v}"))
            .unwrap_or_default();
        let with = if peer.is_empty() {
            "a peer the line does not name".to_string()
        } else {
            format!("peer {peer}")
        };
        let times = if es.len() > 1 {
            format!(" ({} times)", es.len())
        } else {
            String::new()
        };
        let q: Vec<&Quote> = es.iter().map(|e| &e.at).collect();
        acc.suspects
            .push(endpoint(es[0], format!("{name} from {with}")));
        if !peer.is_empty() {
            acc.place("peer", peer.clone(), format!("{here} got {name}"));
        }
        acc.place(
            "link",
            format!("{here} <-> {}", if peer.is_empty() { "?" } else { &peer }),
            name.clone(),
        );
        let surfaced = if es.iter().any(|e| e.surfaced) {
            " (surfaced by PyTorch as ncclRemoteError)"
        } else {
            ""
        };
        if !hca_hosts.is_empty() && status != 12 {
            let title = format!(
                "{here} got {name}{vendor} from {with}{times}{surfaced}: the other end of the HCA fault on {}",
                hca_hosts.join(", ")
            );
            acc.findings.push(finding(
                Code::HangNetworkFault,
                title.clone(),
                &q,
                "a consequence of the fault on the host named above: fix that NIC first",
            ));
            acc.claim(Cause::NetworkFault, 60, title);
        } else if status == 12 && !progress {
            let title = format!(
                "{here} got {name}{vendor} from {with}{times}{surfaced} with no sign that any collective completed before: the two NICs never exchanged data"
            );
            acc.findings.push(finding(Code::HangNetFirstUse, title.clone(), &q, "at first use a retry-exceeded error means the path or its configuration is wrong, not a flaky link: on RoCE check NCCL_IB_GID_INDEX (often 3 for RoCE v2 over IPv4), the traffic class and the routing or ACLs between the hosts, and test the pair with perftest (ib_write_bw -x <gid index> -d <hca>) using the same settings; on InfiniBand check the port state and subnet manager"));
            acc.claim(Cause::NetworkFirstUse, 75, title);
        } else {
            let title = format!(
                "{here} got {name}{vendor} from {with}{times}{surfaced}: transfers on this connection fail"
            );
            let fix = if status == 12 {
                "retry exceeded: the packets stop reaching the peer (a link, cable or switch port on the path, or the peer's NIC): check both ports' error counters and the switch between them; if the peer process died first, read its log"
            } else if status == 5 {
                "WR_FLUSH_ERR follows an earlier error on the same queue pair: look for the first error on either end"
            } else {
                "check both ends' NICs and the path between them (port counters, dmesg), and the peer process's own log"
            };
            acc.findings
                .push(finding(Code::HangNetworkFault, title.clone(), &q, fix));
            acc.claim(Cause::NetworkFault, 70, title);
        }
    }
}
