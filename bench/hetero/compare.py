"""One dissimilar-host job through the multi-host nccl-oracle (`--node-xml` per host) and
through `topo plan --from ... --nccl-version 2.28`, compared field by field as
bench/oracle/hetero.rs does: graph lines, channel line, rings, trees, TUNING cells, per-size
choices. Usage: compare.py A.xml B.xml [C.xml ...]; TOPO and ORACLE name the binaries."""
import json, os, subprocess, sys
TOPO=os.environ.get("TOPO", "target/release/topo")
ORACLE=os.environ.get("ORACLE", "nccl-oracle")
WORK=os.environ.get("WORK", "/tmp/topo-hetero")
COLLS=["broadcast","reduce","allgather","reducescatter","allreduce"]
ALGOS=["Tree","Ring","CollNetDirect","CollNetChain","NVLS","NVLSTree","PAT"]
PROTOS=["LL","LL128","Simple"]
def oracle(files, out):
    args=[ORACLE,"--json",out]
    for f in files: args+=["--node-xml",f]
    r=subprocess.run(args,capture_output=True,text=True)
    if r.returncode: return None, r.stdout[-300:]+r.stderr[-300:]
    d=json.load(open(out)); return d, [l for l in r.stdout.splitlines() if "WARNING" in l]
def topo(files):
    args=[TOPO,"plan","--nccl-version","2.28","--format","json","--collective","all","-b","8","-e","16G","-f","2"]
    for f in files: args+=["--from",f]
    r=subprocess.run(args,capture_output=True,text=True)
    if r.returncode: return None, r.stderr[:300]
    return json.loads(r.stdout), None
def close(a,b): return abs(a-b) <= max(1e-3*max(abs(a),abs(b),1e-6), 0.0006)
def compare(o,t):
    res={}
    for g in ["ring","tree","nvls"]:
        og=o["graphs"].get(g,{}); oline=og.get("line") if og.get("computed") else None
        tg=(t.get("graphs") or {}).get(g); tline=(tg.get("log") or [None])[0] if tg else None
        if oline and "nChannels 0" in oline and not tline: tline=oline
        res["graph "+g]=(oline==tline, f"{oline} | {tline}")
    res["channels"]=(o["channels"]["log_line"]==t["channels"]["log_line"], f'{o["channels"]["log_line"]} | {t["channels"]["log_line"]}')
    res["rings"]=(o["rings"]==t["rings"], "")
    tt=[l for l in t.get("log",[]) if l.startswith("Trees")]
    res["trees"]=(o.get("trees_line")==(tt[0] if tt else None), f'{o.get("trees_line","")[:120]} | {(tt[0] if tt else "")[:120]}')
    cells=o["tuning"]["cells"]; eq=tot=0; first=[]
    for c in COLLS:
        for a in ALGOS:
            for pi,p in enumerate(PROTOS):
                try: lat,bw=cells[c][a][pi][:2]
                except Exception: continue
                ov=(lat,bw) if bw!=0 else None
                x=((t.get("costs") or {}).get(c) or {}).get(a.lower()) or {}
                x=x.get(p.lower())
                tv=(x["lat_us"],x["bw_gbps"]) if x and x.get("bw_gbps") else None
                ok=(ov is None and tv is None) or (ov and tv and close(ov[0],tv[0]) and close(ov[1],tv[1]))
                tot+=1; eq+=bool(ok)
                if not ok and len(first)<3: first.append(f"{c} {a} {p}: {ov} | {tv}")
    res["tuning"]=(eq==tot, f"{eq}/{tot} {first}")
    oc={(r["collective"],r["bytes"]):(r["algo"],r["proto"],r["nchannels"]) for r in o.get("algo_table",[])}
    tc={(r["collective"],r["bytes"]):(r["algo"],r["proto"],r["nchannels"]) for r in t.get("table",[])}
    keys=sorted(oc); ok=sum(oc[k]==tc.get(k) for k in keys); bad=[(k,oc[k],tc.get(k)) for k in keys if oc[k]!=tc.get(k)][:2]
    res["choices"]=(ok==len(keys) and len(keys)>0, f"{ok}/{len(keys)} {bad}")
    return res
if __name__=="__main__":
    files=sys.argv[1:]
    os.makedirs(WORK, exist_ok=True)
    o,w=oracle(files,os.path.join(WORK,"oracle.json"))
    if o is None: print("ORACLE FAIL", w); sys.exit()
    t,e=topo(files)
    if t is None: print("TOPO FAIL", e); sys.exit()
    for k,(ok,d) in compare(o,t).items():
        print(("same " if ok else "DIFF ")+k, "" if ok else d)
    for x in w: print(x)
