import os, time
T0 = float(os.environ.get("TL_T0", "0"))
def pytest_runtest_logstart(nodeid, location):
    with open("/tmp/tl.log", "a") as f:
        f.write(f"{os.environ.get('PYTEST_XDIST_WORKER','m')} {time.time()-T0:.1f} start {nodeid}\n")
def pytest_runtest_logfinish(nodeid, location):
    with open("/tmp/tl.log", "a") as f:
        f.write(f"{os.environ.get('PYTEST_XDIST_WORKER','m')} {time.time()-T0:.1f} end {nodeid}\n")
