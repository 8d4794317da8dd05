import os
from collections import Counter

import pytest
import torch

torch.set_num_threads(int(os.environ.get("PELAB_THREADS", "1")))
if not torch.cuda.is_available():  # Triton kernels (model/triton_attention.py) run in Triton's interpreter on CPU;
    os.environ.setdefault("TRITON_INTERPRET", "1")  # read when a kernel is defined, so before any import of them


def pytest_configure(config):
    """The session's smoke store (tests/browser.py `smoke_store`): one folder for every process of this session,
    named here by the controller before pytest-xdist starts its workers (they inherit the variable); removed when
    the session ends."""
    if not hasattr(config, "workerinput") and "PELAB_SMOKE_SHARED" not in os.environ:
        import tempfile

        config._pelab_smoke = tempfile.mkdtemp(prefix="pelab-smoke-")
        os.environ["PELAB_SMOKE_SHARED"] = config._pelab_smoke


def pytest_unconfigure(config):
    import shutil

    if getattr(config, "_pelab_smoke", None):
        shutil.rmtree(config._pelab_smoke, ignore_errors=True)
        os.environ.pop("PELAB_SMOKE_SHARED", None)


def pytest_collection_modifyitems(config, items):
    """`@pytest.mark.gpu` tests need CUDA: skipped, with the reason, on a machine without it. Then the files
    holding `@pytest.mark.slow` tests (those of 10 s or more) go first, most such tests first: `make test` deals
    whole files to its workers in this order (`-n 3 --dist loadfile --no-loadscope-reorder`), so a long file does
    not start last while the other workers idle."""
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs CUDA (a `gpu` test); this machine has none")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)

    def file_of(item):
        return item.nodeid.split("::")[0]

    n_slow = Counter(file_of(item) for item in items if "slow" in item.keywords)
    items.sort(key=lambda item: -n_slow[file_of(item)])  # a stable sort: the rest keep pytest's order


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """One dataset folder a test module's stores share (each dataset is generated once per module)."""
    return tmp_path_factory.mktemp("data")


@pytest.fixture
def tiny_cfg():
    """Factory for tiny model configs (2 layers, d_model 32, 4 heads)."""
    from workbench.model import ModelConfig

    def make(scheme="rope", arch="paper", **kw):
        base = dict(vocab_size=24, n_classes=6, arch=arch, scheme=scheme, d_model=32, n_heads=4, d_ff=48,
                    n_layers=2, max_len=16, dropout=0.0)
        return ModelConfig(**(base | kw))

    return make


@pytest.fixture
def tokens():
    g = torch.Generator().manual_seed(0)
    t = torch.randint(1, 24, (5, 16), generator=g)
    t[0, 11:] = 0
    t[3, 6:] = 0
    return t


@pytest.fixture(autouse=True, scope="session")
def _hermetic_shipped_store(tmp_path_factory):
    """Tests never read the checkout's results/repro unless they name it: the default shipped store is empty."""
    os.environ["PELAB_SHIPPED"] = str(tmp_path_factory.mktemp("no-shipped"))
    yield
