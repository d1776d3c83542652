#!/usr/bin/env python3
"""Writes a synthetic NCCL_DEBUG=INFO log of a 512-rank job (64 hosts x 8 GPUs, NCCL 2.26
phrasing, interleaved ranks) of about SIZE_MB megabytes (default 100) to stdout.

    python3 bench/diagnose/gen_log.py > /tmp/big.log
    SIZE_MB=10 python3 bench/diagnose/gen_log.py > /tmp/small.log

Init lines, comm lines, Trees and ring lines for every rank, channel counts, then connection
lines (P2P/CUMEM inside a host, NET/IB/<dev>/GDRDMA across hosts, send/recv connIndex 1 to many
peers, as an alltoall's runtime connect prints) until the size is reached. Deterministic.
"""

import os
import random
import sys

HOSTS, GPUS = 64, 8
RANKS = HOSTS * GPUS
TARGET = int(os.environ.get("SIZE_MB", "100")) * 1_000_000
rng = random.Random(1)
out = sys.stdout
written = 0


def emit(rank, tid, msg):
    global written
    host, dev = divmod(rank, GPUS)
    line = f"gpu-node-{host:03d}:{100000 + rank}:{100000 + rank + tid} [{dev}] NCCL INFO {msg}\n"
    written += len(line)
    out.write(line)


emit(0, 0, "NCCL version 2.26.2+cuda12.8")
for r in range(RANKS):
    busid = f"{0x18 + 0x10 * (r % GPUS):x}000"
    emit(r, 0, f"ncclCommInitRank comm 0x55{r:08x} rank {r} nranks {RANKS} cudaDev {r % GPUS} nvmlDev {r % GPUS} busId {busid} commId 0x1234 - Init START")
for r in range(RANKS):
    emit(r, 0, f"comm 0x55{r:08x} rank {r} nRanks {RANKS} nNodes {HOSTS} localRanks {GPUS} localRank {r % GPUS} MNNVL 0")
    trees = " ".join(f"[{c}] {r + 1 if r % GPUS < 7 else -1}/-1/-1->{r}->{r - 1 if r % GPUS else -1}" for c in range(32))
    emit(r, 0, f"Trees {trees}")
for c in range(32):
    emit(0, 0, f"Channel {c:02d}/32 : " + " ".join(str(x) for x in range(0, 40)) + " ...")
for r in range(RANKS):
    emit(r, 0, "32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 32 p2p channels per peer")
    emit(r, 0, f"Init timings - ncclCommInitRank: rank {r} nranks {RANKS} total 2.31 (kernels 0.20, alloc 0.40, bootstrap 0.50, allgathers 0.10, topo 0.30, graphs 0.05, connections 0.70, rest 0.06)")

while written < TARGET:
    r = rng.randrange(RANKS)
    peer = rng.randrange(RANKS)
    if peer == r:
        continue
    c = rng.randrange(32)
    conn = rng.randrange(2)
    if r // GPUS == peer // GPUS:
        emit(r, 9, f"Channel {c:02d}/{conn} : {r}[{r % GPUS}] -> {peer}[{peer % GPUS}] via P2P/CUMEM")
    else:
        emit(r, 9, f"Channel {c:02d}/{conn} : {r}[{r % GPUS}] -> {peer}[{peer % GPUS}] [send] via NET/IB/{r % GPUS}/GDRDMA")
        emit(peer, 9, f"Channel {c:02d}/{conn} : {r}[{r % GPUS}] -> {peer}[{peer % GPUS}] [receive] via NET/IB/{peer % GPUS}/GDRDMA")
