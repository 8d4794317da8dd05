import os, sys, atexit, time
_t0 = time.time()
def _end():
    try:
        t = os.times()
        tl = "transformer_lens" in sys.modules
        with open("/tmp/tl/procs.log", "a") as f:
            f.write(f"{os.getpid()}\t{os.getppid()}\t{t.user+t.system:.2f}\t{time.time()-_t0:.1f}\t{int(tl)}\t{int('torch' in sys.modules)}\t{' '.join(sys.argv[:4])[:150]}\n")
    except Exception:
        pass
atexit.register(_end)
try:
    with open("/tmp/tl/starts.log", "a") as f:
        f.write(f"{os.getpid()}\t{' '.join(sys.argv[:4])[:150]}\n")
except Exception:
    pass
