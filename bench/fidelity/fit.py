#!/usr/bin/env python3
"""Fit topo's measured-behaviour constants (crates/topo-nccl/data/measured.yaml) to the points
bench/fidelity/run.sh wrote: the fixtures of fixtures/fidelity/ (points.tsv) and the published
results of the shared set read in place (results/shared-points.tsv, collect.py). For each
(GPU generation, collective, algorithm, protocol, one node or several, fabric between nodes) that
NCCL chose at some measured size, the latency L (us), node latency N (us per step), bandwidth
efficiency E and ramp R that make
    expected_time = L + N * steps(nodes) + tb / E + R * sqrt(tb),   tb = bytes / (1000 * bw)
closest to the measured time in relative terms (weighted least squares on time / measured - 1),
where bw is NCCL's own algorithm bandwidth for that choice and steps(nodes) the network steps of
NCCL's own latency model (`steps` below). Only healthy results with role fit are used.

Validation is leave-one-source-out: every healthy result is predicted by the rules fitted on
every *other* source (a thread, a repository, a site: `source` of sources.yaml; a fixture is its
own source), and the band is the spread of those held-out residuals, per fabric, basis and size
range, wider where they are few.

usage: fit.py points.tsv [shared-points.tsv] > crates/topo-nccl/data/measured.yaml
       fit.py --report points.tsv [shared-points.tsv]   (the held-out table, results/loso.md)
"""
import csv
import math
import sys
from collections import defaultdict

ARCH = {"dgx-a100": "sm80", "aws-p4d": "sm80", "dgx-h100": "sm90", "aws-p5": "sm90",
        "gcp-a3-mega": "sm90", "hgx-h200": "sm90", "pcie-8x-h100-nvbridge": "sm90",
        "pcie-8x-l40s": "sm89", "2x-rtx4090": "sm89", "dgx-b200": "sm100", "gb200-nvl72": "sm100",
        "alcf-polaris": "sm80", "aws-p4de": "sm80", "nrel-kestrel-h100": "sm90", "aws-p5en": "sm90",
        "gcp-a3-high": "sm90", "alps-gh200": "sm90", "pcie-2x-l40s": "sm89", "aws-p6-b200": "sm100",
        "kalavai-rtx4090": "sm89", "2x-rtx2080ti-nvbridge": "sm75"}
# The fabric names of the fabric vocabulary; a fabric with no held-out point still gets a band.
FABRICS = ["ib", "roce", "efa", "slingshot", "tcpx", "tcpxo", "socket"]


def arch_of(topo):
    prof = topo.split("--profile", 1)[1].split()[0] if "--profile" in topo else ""
    if prof in ARCH:
        return ARCH[prof]
    raise SystemExit(f"no architecture known for `{topo}`")


def nodes_of(nnodes):
    """NCCL's node count as the plan reports it: the trays of one NVLink clique (GB200 NVL72)
    are one node to NCCL, so a full rack is "single" and two racks "multi"."""
    return "multi" if int(nnodes) > 1 else "single"


def fabric_key(r):
    """The fabric between nodes; on one node there is none, and every rule there is `ib`, the
    key the rules had before fabrics were told apart."""
    return r.get("fabric") or "ib" if int(r["nnodes"]) > 1 else "ib"


def log2i(n):
    return max(int(n), 1).bit_length() - 1


def steps(algo, coll, nnodes):
    """Network steps of NCCL's latency model (src/graph/tuning.cc, ncclTopoTuneModel, NCCL
    2.23-2.28): Ring 2(n-1) inter-node steps for allreduce, n-1 otherwise; Tree and NVLSTree
    2 log2i(n); NVLS and CollNet one inter-node hop. measured.rs mirrors this."""
    n = int(nnodes)
    if n <= 1:
        return 0.0
    if algo == "Ring":
        return 2.0 * (n - 1) if coll == "allreduce" else float(n - 1)
    if algo in ("Tree", "NVLSTree"):
        return 2.0 * log2i(n)
    return 1.0


def solve(a, b):
    """Gaussian elimination with partial pivoting; None if singular."""
    n = len(b)
    m = [a[i][:] + [b[i]] for i in range(n)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        if abs(m[c][c]) < 1e-300:
            return None
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                m[r] = [x - f * y for x, y in zip(m[r], m[c])]
    return [m[i][n] / m[i][i] for i in range(n)]


def lsq(points, feats, fixed=0.0):
    """Weighted least squares on relative error: minimise sum((fixed + sum c_i f_i(p)) / t - 1)^2."""
    k = len(feats)
    a = [[0.0] * k for _ in range(k)]
    b = [0.0] * k
    for p in points:
        t = p["t"]
        x = [f(p) / t for f in feats]
        y = 1.0 - fixed / t
        for i in range(k):
            b[i] += x[i] * y
            for j in range(k):
                a[i][j] += x[i] * x[j]
    return solve(a, b)


def tb(s, bw):
    """NCCL's bandwidth term of the time, us."""
    return s / (1000.0 * bw)


# Below this size the latency is visible in the time; a rule fitted only above it has no
# information on latency, so it keeps NCCL's own (a fitted constant there stands for the ramp
# and would be wrong by 10x at small sizes, where NCCL makes the same choice on NVL72).
LAT_VISIBLE_BYTES = 16 << 20

ONE = lambda p: 1.0  # noqa: E731
LIN = lambda p: tb(p["s"], p["bw"])  # noqa: E731
ROOT = lambda p: math.sqrt(tb(p["s"], p["bw"]))  # noqa: E731
STEP = lambda p: p["steps"]  # noqa: E731


def fit(points):
    """(lat_us, lat_node_us, bw_efficiency, ramp) of the rule's time.

    The node term only where the points span two node counts and sizes where latency shows;
    then the three-term form when the sizes span at least 16x and every term comes out physical
    (non-negative latency and ramp, positive efficiency); else the same without the ramp; else
    NCCL's bandwidth with a fitted latency alone. A rule whose smallest size is at least
    LAT_VISIBLE_BYTES keeps NCCL's latency and fits the bandwidth terms."""
    sizes = [p["s"] for p in points]
    span = max(sizes) / min(sizes)
    if min(sizes) >= LAT_VISIBLE_BYTES:
        lat = sum(p["lat"] for p in points) / len(points)
        if len(points) >= 3 and span >= 4:
            c = lsq(points, [LIN, ROOT], fixed=lat)
            if c and c[0] > 0 and c[1] >= 0:
                return lat, 0.0, 1.0 / c[0], c[1]
        c = lsq(points, [LIN], fixed=lat)
        return lat, 0.0, 1.0 / c[0], 0.0
    if len({p["steps"] for p in points}) >= 2 and len(points) >= 8 and span >= 16:
        c = lsq(points, [ONE, STEP, LIN, ROOT])
        if c and c[0] >= 0 and c[1] >= 0 and c[2] > 0 and c[3] >= 0:
            return c[0], c[1], 1.0 / c[2], c[3]
        c = lsq(points, [ONE, STEP, LIN])
        if c and c[0] >= 0 and c[1] >= 0 and c[2] > 0:
            return c[0], c[1], 1.0 / c[2], 0.0
    if len(points) >= 4 and span >= 16:
        c = lsq(points, [ONE, LIN, ROOT])
        if c and c[0] >= 0 and c[1] > 0 and c[2] >= 0:
            return c[0], 0.0, 1.0 / c[1], c[2]
    if len(points) >= 3 and span >= 4:
        c = lsq(points, [ONE, LIN])
        if c and c[0] >= 0 and c[1] > 0:
            return c[0], 0.0, 1.0 / c[1], 0.0
    lat = sum((p["t"] - tb(p["s"], p["bw"])) / p["t"] for p in points) / sum(1.0 / p["t"] for p in points)
    return max(lat, 0.0), 0.0, 1.0, 0.0


def key_of(r):
    algo, proto = r["choice"].split("/")
    return (arch_of(r["topo"]), r["collective"], algo, proto, nodes_of(r["nnodes"]), fabric_key(r))


def usable(r):
    try:
        return float(r["bw_gbps"]) > 0 and not math.isnan(float(r["lat_us"]))
    except ValueError:
        return False


def rules_from(rows):
    """The fitted rules of the healthy, role-fit rows: key -> dict. (A rule over every GPU
    generation, for a generation with none of its own, was tried: it halves the held-out error
    at <= 64 KB but worsens 64 KB - 16 MB and the band coverage, so generations stay apart.)"""
    groups = defaultdict(list)
    sources = defaultdict(set)
    ranks = defaultdict(set)
    for r in rows:
        if r["health"] != "ok" or r["role"] != "fit" or not usable(r):
            continue
        key = key_of(r)
        algo = key[2]
        for k in (key,):
            groups[k].append({"s": float(r["bytes"]), "t": float(r["measured_us"]), "bw": float(r["bw_gbps"]),
                              "lat": float(r["lat_us"]), "steps": steps(algo, r["collective"], r["nnodes"])})
            sources[k].add(r["fixture"].removesuffix(".txt"))
            ranks[k].add(int(r["nranks"]))
    out = {}
    for key, pts in groups.items():
        lat, node, eff, ramp = fit(pts)
        out[key] = {"lat": lat, "node": node, "eff": eff, "ramp": ramp, "points": len(pts),
                    "lo": min(p["s"] for p in pts), "hi": max(p["s"] for p in pts),
                    "rlo": min(ranks[key]), "rhi": max(ranks[key]), "from": sorted(sources[key])}
    return out


def intra_steps(algo, coll, nranks, nnodes):
    """Intra-node steps of NCCL's latency model (src/graph/tuning.cc, ncclTopoTuneModel, NCCL
    2.23-2.28): a ring allreduce takes 2(nRanks-1) steps of which 2(nNodes-1) cross the network,
    other ring collectives nRanks-1 of which nNodes-1; Tree 2(ppn-1); NVLS, NVLSTree and CollNet
    one. measured.rs mirrors this."""
    n, k = int(nranks), max(int(nnodes), 1)
    if algo == "Ring":
        return 2.0 * (n - k) if coll == "allreduce" else float(n - k)
    if algo == "Tree":
        return 2.0 * (max(n // k, 1) - 1)
    return 1.0


# The fabrics NCCL reaches through one network plugin, whose software path (not the wire) sets
# the latency and the ramp of mid sizes: the aws-ofi-nccl plugin over libfabric, with its EFA
# provider (AWS) and its CXI provider (HPE Slingshot: ALCF Polaris and NREL Kestrel both run it).
# One fabric alone has one or two sources, so held out it has no level of its own; the
# plugin's fabrics together have three.
PLUGIN_FAMILY = {"efa": "libfabric", "slingshot": "libfabric"}


def pooled_keys(r):
    """The fallback levels, most specific first: over several nodes through a network plugin,
    one collective and protocol of the plugin's fabrics (PLUGIN_FAMILY); then one collective and
    protocol, one node or several, pooled over GPU generations, algorithms and fabrics. (A level
    per fabric before it, pooled over generations and algorithms, was tried: held out it changed
    no mid size and made the sizes from 16 MB worse, 14.2% to 14.9%, so it is not kept: a fabric
    alone has too few sources to leave one out; docs/fidelity.md.)"""
    _, coll, _, proto, nodes, fab = key_of(r)
    family = PLUGIN_FAMILY.get(fab) if nodes == "multi" else None
    return ([(coll, proto, nodes, family)] if family else []) + [(coll, proto, nodes)]


# The pooled level applies only where it was fitted on at least this many sources: one source
# pooled is that machine's latency, which is what failed to carry over to other machines.
POOLED_MIN_SOURCES = 2


def fit_pooled(points, ramp=False):
    """(lat_us, net_us, intra_us, ramp) added to NCCL's own time, with NCCL's bandwidth kept: the
    launch and synchronisation overhead nccl-tests sees, per call, per network step and per
    intra-node step of NCCL's latency model; with `ramp` (a plugin's level), also ramp x
    sqrt(tb), the pipeline ramp-up of mid sizes the cell rules fit, here over the plugin's
    sources. A term whose steps do not vary over the points, or that comes out negative, is
    dropped and the rest refitted. A level fitted only from LAT_VISIBLE_BYTES up has seen no
    latency and adds nothing."""
    if min(p["s"] for p in points) >= LAT_VISIBLE_BYTES:
        return 0.0, 0.0, 0.0, 0.0
    terms = [("lat", ONE), ("net", STEP), ("intra", lambda p: p["intra"])] + ([("ramp", ROOT)] if ramp else [])
    terms = [t for t in terms if t[0] in ("lat", "ramp") or len({t[1](p) for p in points}) >= 2]
    nccl = [dict(p, t0=p["lat"] + tb(p["s"], p["bw"])) for p in points]
    while terms:
        c = lsq_fixed(nccl, [f for _, f in terms])
        if c is None:
            break
        got = dict(zip([n for n, _ in terms], c))
        if all(v >= 0 for v in got.values()):
            return got.get("lat", 0.0), got.get("net", 0.0), got.get("intra", 0.0), got.get("ramp", 0.0)
        worst = min(got, key=got.get)
        terms = [t for t in terms if t[0] != worst]
    return 0.0, 0.0, 0.0, 0.0


def lsq_fixed(points, feats):
    """lsq with a fixed part per point (`t0`: NCCL's own time)."""
    k = len(feats)
    a = [[0.0] * k for _ in range(k)]
    b = [0.0] * k
    for p in points:
        t = p["t"]
        x = [f(p) / t for f in feats]
        y = 1.0 - p["t0"] / t
        for i in range(k):
            b[i] += x[i] * y
            for j in range(k):
                a[i][j] += x[i] * x[j]
    return solve(a, b)


def pooled_from(rows):
    """The pooled level of the healthy, role-fit rows: key -> dict (POOLED_MIN_SOURCES or more)."""
    groups = defaultdict(list)
    for r in rows:
        if r["health"] != "ok" or r["role"] != "fit" or not usable(r):
            continue
        algo = key_of(r)[2]
        p = {"s": float(r["bytes"]), "t": float(r["measured_us"]), "bw": float(r["bw_gbps"]),
             "lat": float(r["lat_us"]), "steps": steps(algo, r["collective"], r["nnodes"]),
             "intra": intra_steps(algo, r["collective"], r["nranks"], r["nnodes"]), "src": source_of(r)}
        for k in pooled_keys(r):
            groups[k].append(p)
    out = {}
    for key, pts in groups.items():
        srcs = sorted({p["src"] for p in pts})
        if len(srcs) < POOLED_MIN_SOURCES:
            continue
        lat, net, intra, ramp = fit_pooled(pts, ramp=len(key) == 4)
        out[key] = {"lat": lat, "net": net, "intra": intra, "ramp": ramp, "points": len(pts), "from": srcs,
                    "lo": min(p["s"] for p in pts), "hi": max(p["s"] for p in pts)}
    return out


# measured.rs's coverage: a rule fitted only from LAT_VISIBLE_BYTES up applies from a quarter of
# its smallest size, and every rule to rank counts within 2x of those it was fitted on.
BELOW_FITTED, RANK_SPAN = 4, 2


def expected_us(rules, r, pooled=None):
    """(expected time, basis: `rule`, `pooled` or `nccl`) as measured.rs computes it: the rule of
    the cell where one covers the point, else the pooled level of its collective and protocol,
    else NCCL's time. The constants are the file's rounded ones, so a held-out prediction equals
    the binary's."""
    key = key_of(r)
    rule = rules.get(key)
    s, n = float(r["bytes"]), int(r["nranks"])
    if not usable(r) or (r.get("fabric") == "socket" and int(r["nnodes"]) > 1):
        # The socket transport is outside every fit (measured.rs `outside_fits`): NCCL's time.
        return float(r["model_us"]), "nccl"
    if rule is not None:
        size_ok = rule["lo"] < LAT_VISIBLE_BYTES or s * BELOW_FITTED >= rule["lo"]
        ranks_ok = n * RANK_SPAN >= rule["rlo"] and n <= rule["rhi"] * RANK_SPAN
        if not (size_ok and ranks_ok):
            rule = None
    e, basis = float(r["model_us"]), "nccl"
    if rule is None:
        for k in pooled_keys(r):
            e, basis = pooled_us((pooled or {}).get(k), r)
            if basis == "pooled":
                break
        else:
            e, basis = float(r["model_us"]), "nccl"
    else:
        lat, node = round(rule["lat"], 1), round(rule["node"], 2)
        eff, ramp = round(rule["eff"], 3), round(rule["ramp"], 3)
        t = tb(s, float(r["bw_gbps"]))
        st = steps(key_of(r)[2], r["collective"], r["nnodes"])
        e, basis = lat + node * st + t / eff + ramp * math.sqrt(t), "rule"
    bound = tree_bound_us(rules, r)
    e, basis = (bound, "rule") if bound is not None and bound > e else (e, basis)
    one = one_node_row(r)
    if one is not None:
        e1, basis1 = expected_us(rules, one, pooled)
        if e1 > e:
            return e1, basis1
    return e, basis


def one_node_row(r):
    """measured.rs `one_node_bound`: an NVLS or NVLSTree point above one node as NCCL node 0
    alone would run the same size (collect.py `one_node`: NCCL's choice there, its terms and
    rank count), whose expected time bounds the point's (NVLS reduces within every node, so no
    node outruns its own allreduce). None where it does not apply. The bound's band is the
    point's own fabric's (band_fabric reads the point, not this row)."""
    if int(r["nnodes"]) <= 1 or key_of(r)[2] not in ("NVLS", "NVLSTree") or not r.get("choice1"):
        return None
    return dict(r, nnodes="1", nranks=r["nranks1"], choice=r["choice1"], lat_us=r["lat1_us"],
                bw_gbps=r["bw1_gbps"], model_us=r["model1_us"])


def tree_bound_us(rules, r):
    """measured.rs `tree_bound`: Tree and NVLSTree above two nodes at most half the rate of a
    rule fitted on two nodes alone (NCCL's double binary tree, src/graph/trees.cc, gives every
    node twice its two-node bytes above two nodes): that rule at NCCL's two-node bandwidth
    (`bw2_gbps`, collect.py) with its bandwidth term doubled and its latency and ramp times the
    tree's depth, log2i(n) (NCCL's 2 log2i(n) network steps over the two-node 2), where NCCL's
    bandwidth for the choice is no lower than on two nodes. None where it does not apply."""
    algo, n = key_of(r)[2], int(r["nnodes"])
    if n <= 2 or algo not in ("Tree", "NVLSTree") or not r.get("bw2_gbps") or not r.get("nranks2"):
        return None
    bw2, n2 = float(r["bw2_gbps"]), int(r["nranks2"])
    rule = rules.get(key_of(r))
    # Only where NCCL's model keeps the choice's bandwidth above two nodes: where it drops, the
    # doubling is in NCCL's figure already (measured.rs says why).
    if bw2 <= 0 or math.isnan(bw2) or rule is None or float(r["bw_gbps"]) < bw2 * (1 - 1e-9):
        return None
    s = float(r["bytes"])
    size_ok = rule["lo"] < LAT_VISIBLE_BYTES or s * BELOW_FITTED >= rule["lo"]
    ranks_ok = n2 * RANK_SPAN >= rule["rlo"] and n2 <= rule["rhi"] * RANK_SPAN and rule["rhi"] <= n2
    if not (size_ok and ranks_ok):
        return None
    lat, node = round(rule["lat"], 1), round(rule["node"], 2)
    eff, ramp = round(rule["eff"], 3), round(rule["ramp"], 3)
    t2 = tb(s, bw2)
    st2 = steps(algo, r["collective"], 2)
    depth = steps(algo, r["collective"], n) / st2
    return 2 * t2 / eff + depth * (lat + node * st2 + ramp * math.sqrt(t2))


def pooled_us(lvl, r):
    """NCCL's time plus the pooled level's latencies, where the level covers the size."""
    s = float(r["bytes"])
    if lvl is None or not (lvl["lo"] < LAT_VISIBLE_BYTES or s * BELOW_FITTED >= lvl["lo"]):
        return float(r["model_us"]), "nccl"
    algo = key_of(r)[2]
    t = tb(s, float(r["bw_gbps"]))
    added = (round(lvl["lat"], 1) + round(lvl["net"], 2) * steps(algo, r["collective"], r["nnodes"])
             + round(lvl["intra"], 2) * intra_steps(algo, r["collective"], r["nranks"], r["nnodes"])
             + round(lvl.get("ramp", 0.0), 3) * math.sqrt(t))
    return float(r["lat_us"]) + added + t, "pooled"


def size_band(b):
    b = float(b)
    return "small" if b <= 65536 else ("large" if b >= 16 << 20 else "mid")


def source_of(r):
    return r.get("source") or r["fixture"].removesuffix(".txt")


def held_out(rows):
    """Leave one source out: for every healthy result, its points predicted by the rules fitted
    on every other source (the held-out source shapes no level). Yields (row, measured busbw /
    expected busbw, basis)."""
    healthy = [r for r in rows if r["health"] == "ok"]
    for src in sorted({source_of(r) for r in healthy}):
        rest = [r for r in rows if source_of(r) != src]
        rules, pooled = rules_from(rest), pooled_from(rest)
        for r in (r for r in healthy if source_of(r) == src):
            e, basis = expected_us(rules, r, pooled)
            yield r, e / float(r["measured_us"]), basis


def quantile(xs, q):
    xs = sorted(xs)
    i = q * (len(xs) - 1)
    lo = int(math.floor(i))
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)


# The band keeps the middle BAND_SHARE of held-out ratios; never narrower than MIN_HALF_WIDTH
# each side (run-to-run spread of nccl-tests itself). A cell with fewer than MIN_POINTS held-out
# points or fewer than MIN_SOURCES sources takes the band of its fabric and basis pooled over
# sizes, widened by WIDEN (on a log scale); a fabric whose held-out points come from fewer than
# MIN_SOURCES sources takes the band of every fabric's multi-node points of its basis and size
# range, widened by WIDEN twice, saying that no (other) published result was measured on it.
# Results predicted from a stand-in machine (role gap: a profile or fabric topo cannot state
# yet) are reported but never shape a band.
BAND_SHARE, MIN_HALF_WIDTH, MIN_POINTS, MIN_SOURCES, WIDEN = 0.8, 0.10, 8, 2, 1.5


def band_of(qs):
    tail = (1 - BAND_SHARE) / 2
    lo, hi = quantile(qs, tail), quantile(qs, 1 - tail)
    return min(lo, 1 - MIN_HALF_WIDTH), max(hi, 1 + MIN_HALF_WIDTH)


def widen(lo, hi, k):
    """The band k times as wide on a log scale (lo**k, hi**k): a ratio band stays positive."""
    return lo ** k, hi ** k


def band_fabric(r):
    """`any` for one node (no fabric), else the row's fabric."""
    return r.get("fabric") or "ib" if int(r["nnodes"]) > 1 else "any"


def bands(rows, pts=None):
    pts = list(held_out(rows)) if pts is None else pts
    cells = defaultdict(list)
    for r, q, basis in pts:
        if r["role"] == "gap":
            continue
        # NCCL's time involves no fit, so every point is a held-out residual of it, whichever
        # level predicted the point: the band of NCCL's time is from all of them.
        nccl_q = float(r["model_us"]) / float(r["measured_us"])
        cells[(band_fabric(r), "nccl", size_band(r["bytes"]))].append((nccl_q, source_of(r)))
        if basis != "nccl":
            cells[(band_fabric(r), basis, size_band(r["bytes"]))].append((q, source_of(r)))
    out = []
    for fab in ["any"] + FABRICS:
        # NCCL's time first: a rule's cell without enough held-out points of its own takes it,
        # since a fitted expectation is no further off than NCCL's own.
        for basis in ("nccl", "pooled", "rule"):
            fab_pooled = [(q, s) for (f, b, _), v in cells.items() if f == fab and b == basis for q, s in v]
            for sb in ("small", "mid", "large"):
                multi = [q for (f, b, z), v in cells.items() if f != "any" and b == basis and z == sb for q, _ in v]
                v = cells.get((fab, basis, sb), [])
                qs = [q for q, _ in v]
                srcs = len({s for _, s in v})
                fab_srcs = len({s for _, s in fab_pooled})
                nccl = next((b for b in out if (b["fabric"], b["basis"], b["sizes"]) == (fab, "nccl", sb)), None)
                if len(qs) >= MIN_POINTS and srcs >= MIN_SOURCES:
                    lo, hi = band_of(qs)
                    how = "held-out points"
                elif len(fab_pooled) >= MIN_POINTS and fab_srcs >= MIN_SOURCES:
                    lo, hi = widen(*band_of([q for q, _ in fab_pooled]), WIDEN)
                    how = f"pooled over sizes, widened x{WIDEN} (only {len(qs)} points of {srcs} sources here)"
                elif basis == "rule" and nccl is not None:
                    lo, hi = nccl["lo"], nccl["hi"]
                    how = f"the band of NCCL's time here (only {len(qs)} held-out points with a rule, of {srcs} sources)"
                elif len(multi) >= MIN_POINTS:
                    lo, hi = widen(*band_of(multi), WIDEN * WIDEN)
                    how = (f"no published result for this fabric from two sources ({len(fab_pooled)} points of "
                           f"{fab_srcs}): every fabric's multi-node points of these sizes pooled, widened x{WIDEN * WIDEN:g}")
                else:
                    lo, hi = 0.5, 1.5
                    how = "no held-out data: +-50%"
                out.append({"fabric": fab, "basis": basis, "sizes": sb, "lo": lo, "hi": hi, "points": len(qs),
                            "sources": srcs, "how": how})
    return out


def band_for(bs, r, basis):
    return bs[(band_fabric(r), basis, size_band(r["bytes"]))]


def summary_row(label, v, bs):
    """| label | points | sources | median |err| >= 16 MB | 64 KB-16 MB | <= 64 KB | in band |"""
    def med(sb):
        e = [abs(1 / q - 1) for r, q, _ in v if size_band(r["bytes"]) == sb]
        return f"{quantile(e, 0.5):.1%} ({len(e)})" if e else "-"
    inside = sum(1 for r, q, ruled in v if band_for(bs, r, ruled)["lo"] <= q <= band_for(bs, r, ruled)["hi"])
    return (f"| {label} | {len(v)} | {len({source_of(r) for r, _, _ in v})} | {med('large')} | {med('mid')} | "
            f"{med('small')} | {inside}/{len(v)} ({inside / max(len(v), 1):.0%}) |")


def report(rows):
    """Markdown: the held-out error per fabric and size range, the band coverage, per source."""
    pts = list(held_out(rows))
    bs = {(b["fabric"], b["basis"], b["sizes"]): b for b in bands(rows, pts)}
    print("| fabric | held-out points | sources | median abs error >= 16 MB (points) | 64 KB - 16 MB | <= 64 KB | inside band |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    known = [p for p in pts if p[0]["role"] != "gap"]
    print(summary_row("all, machines topo can state", known, bs))
    for fab in ["any"] + FABRICS:
        v = [p for p in known if band_fabric(p[0]) == fab]
        if v:
            print(summary_row("one node" if fab == "any" else fab, v, bs))
    gaps = [p for p in pts if p[0]["role"] == "gap"]
    if gaps:
        print(summary_row("machines not yet stateable (stand-ins)", gaps, bs))
    print(summary_row("every healthy result", pts, bs))
    print()
    print("Per source (held out: predicted by the rules fitted without it):")
    print()
    print("| source | fabric | points | with a rule | pooled | median abs error | worst | inside band |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for src in sorted({source_of(r) for r, _, _ in pts}):
        v = [(r, q, ruled) for r, q, ruled in pts if source_of(r) == src]
        errs = [1 / q - 1 for _, q, _ in v]
        inside = sum(1 for r, q, ruled in v if band_for(bs, r, ruled)["lo"] <= q <= band_for(bs, r, ruled)["hi"])
        fabs = ",".join(sorted({band_fabric(r) for r, _, _ in v}))
        print(f"| {src} | {fabs} | {len(v)} | {sum(1 for *_, ru in v if ru == 'rule')} | "
              f"{sum(1 for *_, ru in v if ru == 'pooled')} | "
              f"{quantile([abs(e) for e in errs], 0.5):.1%} | {max(errs, key=abs):+.1%} | {inside}/{len(v)} |")


def load(paths):
    """The points of every file; a fixture that is the same published table as a shared result
    topo cannot state yet (sources.yaml: dup_of, expect xfail: fabric) is a gap too."""
    import os
    import yaml
    index = yaml.safe_load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "sources.yaml")))
    gaps = {e["dup_of"] for e in index["results"]
            if e.get("dup_of") and str(e.get("expect", "")).startswith("xfail: fabric")}
    # A fixture's fabric is its shared twin's (the fixtures predate fabrics; the others are
    # InfiniBand or one node).
    fabric = {e["dup_of"]: e["fabric"] for e in index["results"] if e.get("dup_of")}
    rows = []
    for p in paths:
        for r in csv.DictReader(open(p), delimiter="\t"):
            if r["fixture"] in gaps:
                r["role"] = "gap"
            r.setdefault("fabric", fabric.get(r["fixture"], "ib"))
            rows.append(r)
    return rows


def main():
    paths = [a for a in sys.argv[1:] if not a.startswith("--")]
    rows = load(paths)
    if "--report" in sys.argv:
        report(rows)
        return
    write_yaml(rows)


def write_yaml(rows):
    print("# topo's measured-behaviour layer: corrections of NCCL's cost-model time to what nccl-tests")
    print("# measures, per (GPU generation, collective, algorithm, protocol, one node or several, fabric).")
    print("#   expected_time_us = lat_us + lat_node_us * steps(nodes) + tb / bw_efficiency + ramp * sqrt(tb)")
    print("# with tb = bytes / (1000 * bw), bw NCCL's own algorithm bandwidth for the chosen pair (tuning.rs),")
    print("# so tb is NCCL's bandwidth term in us; ramp (sqrt-us) models the pipeline ramp-up of mid sizes;")
    print("# steps(nodes) counts the network steps of NCCL's latency model (Ring 2(n-1) for allreduce, n-1")
    print("# otherwise; Tree and NVLSTree 2 log2(n); NVLS and CollNet 1; none on one node: tuning.cc).")
    print("# NCCL's choice is not changed. Written by bench/fidelity/fit.py from bench/fidelity/points.tsv")
    print("# (fixtures/fidelity/) and bench/fidelity/results/shared-points.tsv (the shared set, read in")
    print("# place: bench/fidelity/sources.yaml); `from` names the results of each rule. `fabric` is the")
    print("# fabric between nodes (ib when absent; one-node rules have none).")
    print("# A rule fitted only at sizes >= 16 MB keeps NCCL's latency as lat_us (no measurement sees it);")
    print("# measured.rs applies it from a quarter of its smallest size up, and every rule to rank counts")
    print("# within 2x of `ranks`, the rank counts it was fitted on.")
    print("# Sizes no rule matches keep NCCL's time. NCCL versions are not told apart: the results")
    print("# span 2.18 to 2.28 and too few of each to fit per version.")
    print("rules:")
    rules = rules_from(rows)
    for key in sorted(rules):
        r = rules[key]
        arch, coll, algo, proto, nodes, fab = key
        fabric = f", fabric: {fab}" if fab != "ib" else ""
        node = f", lat_node_us: {r['node']:.2f}" if round(r["node"], 2) > 0 else ""
        print(f"  - {{arch: {arch}, collective: {coll}, algo: {algo}, proto: {proto}, nodes: {nodes}{fabric}, "
              f"lat_us: {r['lat']:.1f}{node}, bw_efficiency: {r['eff']:.3f}, ramp: {r['ramp']:.3f}, points: {r['points']}, "
              f"sizes: \"{int(r['lo'])}-{int(r['hi'])}\", ranks: \"{r['rlo']}-{r['rhi']}\", "
              f"from: [{', '.join(r['from'])}]}}")
    print("# The pooled level: where no rule of the cell covers a size, NCCL's time plus latencies fitted")
    print("# over every source of one collective and protocol, one node or several (GPU generations,")
    print("# algorithms and fabrics pooled); NCCL's bandwidth kept:")
    print("#   expected_time_us = NCCL's time + lat_us + net_step_us * steps(nodes) + intra_step_us * intra_steps")
    print("# with intra_steps the intra-node steps of NCCL's latency model (Ring 2(nRanks - nNodes) for")
    print(f"# allreduce, nRanks - nNodes otherwise; Tree 2(ppn - 1); the others 1). Only levels of {POOLED_MIN_SOURCES} sources or")
    print("# more; applied from a quarter of the smallest fitted size up where that is >= 16 MB.")
    print("# A level with `plugin` comes first for the fabrics NCCL reaches through that network plugin")
    print("# (libfabric: aws-ofi-nccl's EFA and CXI providers; several nodes): fitted over those fabrics'")
    print("# sources only, with `ramp` (sqrt-us) x sqrt(tb) added, as the rules' pipeline ramp-up")
    print("# (https://github.com/aws/aws-ofi-nccl; https://docs.cscs.ch/software/communication/libfabric).")
    print("pooled:")
    for key, lvl in sorted(pooled_from(rows).items(), key=lambda kv: (kv[0][:3], kv[0][3:])):
        coll, proto, nodes = key[:3]
        plugin = f", plugin: {key[3]}" if len(key) == 4 else ""
        ramp = f", ramp: {lvl['ramp']:.3f}" if len(key) == 4 else ""
        print(f"  - {{collective: {coll}, proto: {proto}, nodes: {nodes}{plugin}, lat_us: {lvl['lat']:.1f}, "
              f"net_step_us: {lvl['net']:.2f}, intra_step_us: {lvl['intra']:.2f}{ramp}, points: {lvl['points']}, "
              f"sizes: \"{int(lvl['lo'])}-{int(lvl['hi'])}\", from: [{', '.join(lvl['from'])}]}}")
    print("# The band a healthy measurement falls in: measured busbw / expected busbw between lo and hi,")
    print("# per fabric (`any` on one node), basis (`rule`: a rule of the cell gave the expected value;")
    print("# `pooled`: the pooled level; `nccl`: NCCL's own time) and")
    print("# size range (small <= 64 KB, large >= 16 MB), from leave-one-source-out residuals: every healthy")
    print("# result predicted by the rules fitted without its source; the middle")
    print(f"# {BAND_SHARE:.0%} of them, at least +-{MIN_HALF_WIDTH:.0%}; wider where they are few (`how`).")
    print("bands:")
    for b in bands(rows):
        print(f"  - {{fabric: {b['fabric']}, basis: {b['basis']}, sizes: {b['sizes']}, lo: {b['lo']:.3f}, "
              f"hi: {b['hi']:.3f}, points: {b['points']}, sources: {b['sources']}, how: \"{b['how']}\"}}")


if __name__ == "__main__":
    main()
