import subprocess, collections, re
from workbench.analysis.reproduce import CHANGES, APPLIES, _analysed, _needs
from workbench.store.runstore import RunStore
def commit_of(v):
    v = (v or "").removesuffix("-dirty")
    m = re.search(r"(?:-g)?([0-9a-f]{7,40})$", v)
    if not m: return None
    ok = subprocess.run(["git","cat-file","-e",m.group(1)+"^{commit}"],capture_output=True).returncode == 0
    return m.group(1) if ok else None
cache={}
def anc(a,b):
    if (a,b) not in cache:
        cache[a,b] = subprocess.run(["git","merge-base","--is-ancestor",a,b],capture_output=True).returncode==0
    return cache[a,b]
cnt=collections.Counter(); amb=collections.defaultdict(list)
for root in ["results/repro","results/paper"]:
    st = RunStore(root, readonly=True)
    for rid in st.run_ids():
        r = st.get(rid); tabs = r.tables()
        code = commit_of(r.info.get("code_version"))
        if code is None: cnt["nocode"]+=1
        for n in tabs:
            prov = r.provenance_of(n) or {}
            for c in CHANGES.get(n, ()):
                if c.applies and not APPLIES[c.applies](r.config): continue
                when = _analysed(r, n)
                pcode = commit_of(prov.get("code_version")) if prov else None
                clock = when < c.landed
                if pcode:
                    a = anc(c.commit, pcode); key=("prov", clock, a)
                elif code:
                    a = anc(c.commit, code); key=("train", clock, a)
                else:
                    key=("none", clock)
                cnt[key]+=1
                if key in [("train",False,False),("prov",False,False)]:
                    amb[rid].append((n,c.commit,r.info.get("code_version"), prov.get("code_version") if prov else None))
print(cnt)
for k,v in amb.items(): print(k, v)
