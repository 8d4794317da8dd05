import os, time, resource
T0 = float(os.environ.get("TL_T0", "0"))
_s = {}
def _cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
def pytest_runtest_logstart(nodeid, location):
    _s[nodeid] = (time.time(), _cpu())
def pytest_runtest_logfinish(nodeid, location):
    t, c = _s.pop(nodeid)
    with open("/tmp/tl/tl.log", "a") as f:
        f.write(f"{os.environ.get('PYTEST_XDIST_WORKER','m')}\t{t-T0:.1f}\t{time.time()-t:.1f}\t{_cpu()-c:.1f}\t{nodeid}\n")
