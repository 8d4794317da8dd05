"""Bad input gets a clear error (`error: ...`, exit 2) before anything is written; never a traceback, a hang or a
half-made run folder. The cases are the issue-10 probe's examples plus the same method applied further."""
import warnings
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from workbench.cli import app

from test_app import quiet_app_cmd

TRAIN = ["train", "-p", "smoke", "-q", "--threads", "1"]
# (arguments after TRAIN, words the message must contain)
BAD_TRAIN = [
    (["--set", "train.lr=abc"], ["train.lr", "'abc'", "number"]),
    (["--set", "train.lr=[1,2]"], ["train.lr", "[1, 2]"]),
    (["--set", "train.lr=Infinity"], ["train.lr", "inf", "finite"]),
    (["--set", "train.lr=0"], ["train.lr", "(0, 10]"]),
    (["--set", "train.betas=5"], ["train.betas", "list"]),
    (["--set", "train.betas=[0.9]"], ["train.betas", "two numbers"]),
    (["--set", "train.betas=[0.9,1.5]"], ["train.betas[1]", "[0, 1)"]),
    (["--set", "train.weight_decay=-5"], ["train.weight_decay", "-5", "[0, 10]"]),
    (["--set", "train.epochs=2.5"], ["train.epochs", "2.5", "integer"]),
    (["--set", "train.epochs=true"], ["train.epochs", "True", "integer"]),
    (["--set", "train.epochs=0"], ["train.epochs", "[1, 100000]"]),
    (["--set", "train.grad_clip=-1"], ["train.grad_clip", "-1"]),
    (["--set", "train.batch_size=-3"], ["train.batch_size", "-3"]),
    (["--set", "train.schedule=linear"], ["train.schedule", "cosine"]),
    (["--set", "train.warmup_frac=1"], ["train.warmup_frac", "[0, 1)"]),
    (["--set", "train.bogus=1"], ["unknown train key", "bogus"]),
    (["--set", "model.d_model=1000000000"], ["model.d_model", "1000000000"]),
    (["--set", "model.d_model=65536"], ["GB of memory", "available", "model.d_model=65536"]),
    (["--set", "model.n_layers=100000"], ["model.n_layers", "100000"]),
    (["--set", "model.n_heads=3"], ["n_heads=3", "divide"]),
    (["--set", "model.dropout=1.5"], ["model.dropout", "[0, 1)"]),
    (["--set", "model.scheme_kwargs=5"], ["model.scheme_kwargs", "object"]),
    (["--set", "model.arch=x"], ["model.arch", "paper"]),
    (["--set", "model.bogus=1"], ["unknown model", "bogus"]),
    (["--set", "task.n_examples=1e12"], ["task.n_examples", "integer"]),
    (["--set", "task.n_examples=1000000000000"], ["GB of memory", "task.n_examples"]),
    (["--set", "task.seq_len=1e9"], ["task.seq_len", "integer"]),
    (["--set", "task.seq_len=1000000000"], ["GB of memory", "task.seq_len"]),
    (["--set", "task.n_examples=1"], ["task.n_examples", ">= 2"]),
    (["--set", "task.seed=-1"], ["task.seed", ">= 0"]),
    (["--set", "nonsense"], ["SECTION.KEY=VALUE"]),
    (["--set", "foo.bar=1"], ["model., task. or train."]),
    (["--scheme", "nosuch"], ["nosuch"]),
    (["--task", "t9"], ["t9"]),
    (["--preset", "huge"], ["huge", "presets"]),
    (["--arch", "rnn"], ["rnn", "paper"]),
    (["--seed", "-4"], ["train.seed", "-4"]),
    (["--tag", "x" * 300], ["--tag", "300 characters", "1 to 64"]),
    (["--tag", "///"], ["--tag", "letter or digit"]),
    (["--threads", "-1"], ["--threads", "-1", "from 1 to"]),
    (["--threads", "100000"], ["--threads", "100000", "from 1 to"]),
    (["--device", "bogus"], ["--device", "bogus"]),
    (["--device", "tpu"], ["--device", "tpu"]),
    (["--set", "model.scheme_kwargs.base=-1"], ["base=-1", "number > 1"]),
    (["--set", 'model.scheme_kwargs.base="abc"'], ["base='abc'", "number > 1"]),
    (["--resume", "--force"], ["--resume and --force contradict", "pass one"]),
]
if not torch.cuda.is_available():
    BAD_TRAIN.append((["--device", "cuda"], ["CUDA is not available", "--device cpu"]))


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("PELAB_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("PELAB_THREADS", raising=False)
    threads = torch.get_num_threads()
    yield tmp_path
    torch.set_num_threads(threads)


def invoke(args):
    r = CliRunner().invoke(app, args, env={"COLUMNS": "250"})  # rich error boxes must not cut the message
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise AssertionError(f"{args}: uncaught {type(r.exception).__name__}: {r.exception}")
    return r


def assert_clear_error(r, words, args):
    out = r.output
    assert r.exit_code == 2, (args, r.exit_code, out)
    assert out.startswith("error: ") or "Invalid value" in out, (args, out)
    assert "Traceback" not in out and 'File "' not in out, (args, out)
    for w in words:
        assert w in out, (args, w, out)


@pytest.mark.parametrize("args,words", BAD_TRAIN, ids=[" ".join(a)[:40] for a, _ in BAD_TRAIN])
def test_bad_train_input_is_a_clear_error_and_leaves_nothing(env, args, words):
    root = env / "runs"
    r = invoke(TRAIN + ["--root", str(root)] + args)
    assert_clear_error(r, words, args)
    made = [p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")] if root.exists() else []
    assert made == [], f"{args} left run folders {made}"


BAD_OTHER = [
    (["runs", "--root", "/dev/null"], ["/dev/null", "--root"]),
    (["runs", "--status", "bogus"], ["--status bogus", "finished"]),
    (["analyze", "RUN", "--what", "ablation", "--all"], ["--what ablation and --all", "drop one"]),
    (["runs", "--scheme", "nosuch"], ["--scheme nosuch", "unknown", "rope"]),
    (["runs", "--task", "t9"], ["--task t9", "trigger-distance"]),
    (["runs", "--preset", "nosuch"], ["--preset nosuch", "repro"]),
    (["runs", "--arch", "bogus"], ["--arch bogus", "paper"]),
    (["train", "-p", "smoke", "--set", "model.vocab_size=3"], ["model.vocab_size=3", "fixed by the dataset"]),
    (["train", "-p", "smoke", "--set", "model.n_classes=2"], ["model.n_classes=2", "fixed by the dataset"]),
    (["data", "make", "-p", "smoke", "--set", "n_examples=1000000000000", "--out", "DATA"], ["GB of memory"]),
    (["runs", "--root", "/dev/null/x"], ["/dev/null/x"]),
    (["train", "-p", "smoke", "--root", "/dev/null/x"], ["/dev/null/x"]),
    (["analyze", "../../x", "--what", "qk-means"], ["unknown run", "../../x"]),
    (["analyze", "/abs/path", "--what", "qk-means"], ["unknown run"]),
    (["analyze", "nosuch-run", "--what", "qk-means"], ["no such run"]),
    (["analyze", "RUN", "--what", "ablation", "--max-examples", "0"], ["--max-examples", "greater than or equal to 1"]),
    (["analyze", "RUN", "--what", "ablation", "--n-boot", "-5"], ["--n-boot", "greater than or equal to 1"]),
    (["analyze", "RUN", "--what", "nope"], ["unknown analysis"]),
    (["analyze", "RUN", "--what", "qk-means", "--threads", "0"], ["--threads"]),
    (["analyze", "RUN", "--what", "qk-means", "--device", "bogus"], ["--device", "bogus"]),
    (["report", "--runs", "seed=abc"], ["seed", "whole numbers"]),
    (["report", "--runs", "colour=red"], ["unknown key"]),
    (["report", "--out", "/dev/null/x/r.html"], ["--out /dev/null/x/r.html", "cannot be a folder"]),
    (["report", "--out", "DATA.pdf"], ["--out", "the report is HTML", "d.html"]),
    (["report", "--out", "DATA/r.html", "--summary", "DATA/r.html"], ["--summary", "is the report's --out"]),
    (["report", "--out", "DATA/r.html", "--summary", "/tmp"], ["--summary", "/tmp is a folder", "summary.json"]),
    (["analyze", "RUN", "--what", ","], ["--what ','", "names no analysis"]),
    (["analyze", "RUN", "--what", "qk-means", "--aggregate"], ["--aggregate", "add ablation to --what"]),
    (["analyze", "RUN", "--what", "ablation", "--aggregate"], ["--aggregate", "two runs or more"]),
    (["analyze", "RUN", "RUN", "--what", "ablation", "--aggregate"], ["--aggregate", "each once"]),
    (["train", "RUN", "--task", "t2", "--preset", "cpu", "--dry-run"], ["leave out --task, --preset"]),
    (["train", "RUN", "--arch", "encoder", "--fidelity", "authors", "--dry-run"], ["leave out --arch, --fidelity"]),
    (["sweep", "GRID:schemes = [\"rope\"]\n[[variants]]\nname = \"n\"\nscheme = \"nope\"", "--tags", "bogus"],
     ["no variant(s) 'bogus'", "its variants: n"]),
    (["figure", "RUN", "ablation", "-o", "DATA.svg", "--width", "0"], ["--width"]),
    (["figure", "RUN", "ablation", "-o", "DATA.svg", "--height", "-5"], ["--height"]),
    (["figure", "RUN", "ablation", "-o", "DATA.svg", "--scale", "0"], ["--scale 0.0", "> 0"]),
    (["sweep", "GRID:set = 5"], ["grid: set", "table"]),
    (["sweep", "GRID:schemes = [\"rope\"]", "--shard", "2/2"], ["--shard '2/2'", "0 <= I < N", "0/2 and 1/2"]),
    (["sweep", "GRID:schemes = [\"rope\"]", "--shard", "x"], ["--shard 'x'", "0 <= I < N"]),
    (["sweep", "GRID:variants = 3"], ["variants", "list of tables"]),
    (["sweep", "GRID:seeds = [\"abc\"]\nschemes = [\"rope\"]"], ["train.seed", "abc"]),
    (["sweep", "GRID:preset = 5\nschemes = [\"rope\"]"], ["preset", "5"]),
    (["sweep", "GRID:schemes = [\"rope\"\n"], ["grid", "not valid TOML"]),
    (["sweep", "GRID:schemes = [\"rope\"]", "--workers", "100000"], ["--workers", "from 1 to"]),
    (["sweep", "GRID:schemes = [\"rope\"]", "--workers", "0"], ["--workers", "from 1 to"]),
    (["ship", "RUN", "--to", "DATA/out", "--no-analyze", "--tables", "ablation"], ["--tables", "--no-analyze"]),
    (["ship", "RUN", "--to", "DATA/out", "--tier", "1"], ["--tier needs --grid"]),
    (["app", "--port", "-1"], ["--port"]),
    (["app", "--port", "99999"], ["--port"]),
    (["app", "--root", "/dev/null/x"], ["/dev/null/x"]),
]


def train_smoke_run(tmp):
    """One finished smoke run in a new store `tmp/runs` (data in `tmp/data`); torch's thread count is kept."""
    from workbench.store import RunStore
    from workbench.train import resolve_config, train

    store = RunStore(tmp / "runs", data_dir=tmp / "data")
    threads = torch.get_num_threads()
    run = train(resolve_config(preset="smoke", store=store), store, progress=False, threads=1)
    torch.set_num_threads(threads)
    return run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One finished smoke run (for the analyze cases)."""
    return train_smoke_run(tmp_path_factory.mktemp("trained"))


@pytest.mark.parametrize("args,words", BAD_OTHER, ids=[" ".join(a)[:40] for a, _ in BAD_OTHER])
def test_bad_input_to_every_command_is_a_clear_error(env, trained, args, words, monkeypatch):
    monkeypatch.setenv("PELAB_DATA", str(trained.store.data_dir))
    args = [a.replace("RUN", trained.id).replace("DATA", str(env / "d")) for a in args]
    if args[0] == "sweep":
        grid = env / "grid.toml"
        grid.write_text(args[1].split(":", 1)[1] + "\n")
        args = ["sweep", str(grid), "-q", "--threads", "1"] + args[2:]
    if "--root" not in args and args[0] not in ("app", "data"):
        args += ["--root", str(trained.store.root)]
    if args[0] == "report":
        args += [] if "--out" in args else ["--out", str(env / "r.html")]
    if args[0] == "app":
        import dash

        monkeypatch.setattr(dash.Dash, "run", lambda self, **kw: pytest.fail("the server must not start"))
        quiet_app_cmd(monkeypatch)
    r = invoke(args)
    assert_clear_error(r, words, args)
    assert sorted(p.name for p in trained.store.root.iterdir() if not p.name.startswith(".")) == sorted(
        ["index.sqlite", trained.id])


def test_compare_of_a_folder_without_runs_is_a_clear_error(env):
    (env / "empty").mkdir()
    args = ["compare", str(env / "empty"), "--out", str(env / "C.md")]
    assert_clear_error(invoke(args), ["holds no finished run", "results/repro"], args)
    assert not (env / "C.md").exists() and not list((env / "empty").iterdir())


def test_old_store_option_names_still_work(env, monkeypatch):
    import dash

    from workbench.store import RunStore

    calls = []
    monkeypatch.setattr(dash.Dash, "run", lambda self, **kw: calls.append(self.server.config["PELAB"].store_root))
    RunStore(env / "a"), RunStore(env / "b")  # `app` serves existing stores only (issue 43)
    quiet_app_cmd(monkeypatch)
    assert invoke(["app", "--runs", str(env / "a")]).exit_code == 0
    assert invoke(["app", "--root", str(env / "b")]).exit_code == 0
    assert calls == [(env / "a").resolve(), (env / "b").resolve()]
    RunStore(env / "c")
    r = invoke(["report", "--store", str(env / "c"), "--out", str(env / "r.html")])  # read: it holds no run
    assert_clear_error(r, ["no runs match --runs 'all'"], "report --store")
    r = invoke(["report", "--store", str(env / "c"), "--root", str(env / "d"), "--out", str(env / "r.html")])
    assert_clear_error(r, ["different stores"], "report --store --root")


@pytest.mark.parametrize("args,words", [
    (["--checkpoint-every", "0"], ["--checkpoint-every 0", ">= 1"]),
    (["--resume"], ["--resume: no run t1-rope-smoke-s42-", "leave out --resume"]),
])
def test_train_refuses_before_it_makes_the_store(env, args, words):
    """A bad --checkpoint-every, or --resume of a run never started (it trained a fresh one), creates no store."""
    r = invoke(TRAIN + ["--root", str(env / "runs")] + args)
    assert_clear_error(r, words, args)
    assert not (env / "runs").exists()


def test_sweep_refuses_a_bad_checkpoint_every_before_it_makes_the_store(env):
    """`sweep` checks the step options `train` checks (one `options.step_options`) before anything is made."""
    grid = env / "grid.toml"
    grid.write_text('preset = "smoke"\nschemes = ["rope"]\n')
    r = invoke(["sweep", str(grid), "-q", "--root", str(env / "runs"), "--checkpoint-every", "0"])
    assert_clear_error(r, ["--checkpoint-every 0", ">= 1"], "sweep --checkpoint-every 0")
    assert not (env / "runs").exists()


def test_resume_of_a_run_not_in_the_store_trains_nothing(env):
    from workbench.store import RunStore

    RunStore(env / "runs")
    r = invoke(TRAIN + ["--root", str(env / "runs"), "--resume"])
    assert_clear_error(r, ["--resume: no run", "to continue"], "train --resume")
    assert RunStore(env / "runs").query().empty


@pytest.mark.parametrize("tags", ["bogus", "n,bogus", ""])
def test_sweep_of_an_unknown_variant_is_refused_before_the_store_is_made(env, tags):
    grid = env / "grid.toml"
    grid.write_text('preset = "smoke"\nschemes = ["rope"]\n[[variants]]\nname = "n"\nscheme = "nope"\n')
    r = invoke(["sweep", str(grid), "--tags", tags, "-q", "--root", str(env / "runs")])
    assert_clear_error(r, ["no variant(s)", "its variants: n"], tags)
    assert not (env / "runs").exists()


def test_a_train_failing_before_its_first_epoch_leaves_no_run_folder(env, monkeypatch):
    import workbench.model

    from workbench.store import RunStore
    from workbench.train import resolve_config, train

    store = RunStore(env / "runs")
    cfg = resolve_config(preset="smoke", store=store)

    def boom(*a, **k):
        raise MemoryError("simulated allocation failure")

    monkeypatch.setattr(workbench.model, "PEClassifier", boom)
    with pytest.raises(MemoryError):
        train(cfg, store, progress=False, threads=1)
    assert not store.exists(store.run_id(cfg)) and store.query().empty


def test_ctrl_c_says_resume_only_when_a_run_was_stored(env, monkeypatch):
    """Ctrl-C while the data are made (no run folder yet): --resume would find nothing to continue, so the
    message says to run the command again; once the run is stored it says --resume."""
    import workbench.train

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    root = env / "runs"
    monkeypatch.setattr(workbench.train, "train", interrupted)
    r = invoke(["train", "--preset", "smoke", "--root", str(root), "-q"])
    assert r.exit_code == 130 and "before any run was stored" in r.output and "--resume (" not in r.output

    def stored_then_interrupted(cfg, store, **k):
        store.create(cfg)
        raise KeyboardInterrupt

    monkeypatch.setattr(workbench.train, "train", stored_then_interrupted)
    r = invoke(["train", "--preset", "smoke", "--root", str(root), "-q"])
    assert r.exit_code == 130 and "continue with the same command and --resume (t1-" in r.output


def test_non_finite_loss_fails_the_run_instead_of_finishing_it(env, monkeypatch):
    import workbench.train.loop as loop

    from workbench.store import RunStore
    from workbench.train import resolve_config, train

    store = RunStore(env / "runs")
    cfg = resolve_config(preset="smoke", store=store)
    real = loop.F.cross_entropy
    monkeypatch.setattr(loop.F, "cross_entropy", lambda *a, **k: real(*a, **k) * float("nan"))
    with pytest.raises(FloatingPointError, match="nan"):
        train(cfg, store, progress=False, threads=1)
    assert not store.exists(store.run_id(cfg))  # failed in the first epoch: nothing half-made is kept


def test_a_diverging_run_is_a_clear_error_of_the_command(env, monkeypatch):
    """`train` whose loss becomes NaN ends with the loop's message (lower train.lr ...) as a one-line error, not a
    traceback, and keeps no half-made run."""
    import workbench.train.loop as loop

    real = loop.F.cross_entropy
    monkeypatch.setattr(loop.F, "cross_entropy", lambda *a, **k: real(*a, **k) * float("nan"))
    args = TRAIN + ["--root", str(env / "runs")]
    assert_clear_error(invoke(args), ["the training loss became nan", "train.lr"], args)
    assert not [p for p in (env / "runs").iterdir() if p.is_dir() and not p.name.startswith(".")]


def test_resume_with_another_thread_count_warns(env):
    from workbench.store import RunStore
    from workbench.train import resolve_config, train

    store = RunStore(env / "runs")
    cfg = resolve_config(preset="smoke", store=store)
    run = train(cfg, store, progress=False, threads=1, stop_after_epochs=1, device="cpu")
    assert run.status == "interrupted" and run.info["threads"] == 1
    with pytest.warns(UserWarning, match="resuming with 2 CPU threads, but it started with 1"):
        run = train(cfg, store, progress=False, threads=2, resume=True, device="cpu")
    assert run.status == "finished" and run.info["threads"] == 1 and run.info["resumed_threads"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same count: no warning
        cfg2 = resolve_config(preset="smoke", seed=7, store=store)
        train(cfg2, store, progress=False, threads=1, stop_after_epochs=1, device="cpu")
        train(cfg2, store, progress=False, threads=1, resume=True, device="cpu")


def test_resume_on_other_numerics_warns_and_records_both(env):
    """A run resumed where its numerics differ (here: run.json says it started at another SIMD level) keeps the
    numerics it started with, records the new ones in `resumed_numerics`, and is never held to either level nor
    expected bit-identical by a re-training (`recorded_numerics` names both)."""
    from workbench.store import RunStore
    from workbench.store.run import recorded_numerics
    from workbench.train import resolve_config, train
    from workbench.train.recreate import numerics_note, simd_hold

    store = RunStore(env / "runs")
    cfg = resolve_config(preset="smoke", store=store)
    run = train(cfg, store, progress=False, threads=1, stop_after_epochs=1, device="cpu")
    here = run.info["numerics"]["cpu_capability"]
    other = "DEFAULT" if here != "DEFAULT" else "AVX2"
    run.update_info(numerics={**run.info["numerics"], "cpu_capability": other})
    with pytest.warns(UserWarning, match=f"other numerics than it started on \\(cpu_capability {other} then, "
                                         f"{here} now"):
        run = train(cfg, store, progress=False, threads=1, resume=True, device="cpu")
    info = run.info
    assert run.status == "finished" and info["resumed_from_epoch"] == 1
    assert info["numerics"]["cpu_capability"] == other and info["resumed_numerics"] == {"cpu_capability": here}
    assert recorded_numerics(info)["cpu_capability"] == f"{other}, then {here} after a resume"
    assert simd_hold(info) == {}  # no single level to hold a re-training to
    assert "after a resume there" in numerics_note(info)
    with warnings.catch_warnings():  # the same numerics: nothing recorded, no warning
        warnings.simplefilter("error")
        cfg2 = resolve_config(preset="smoke", seed=7, store=store)
        train(cfg2, store, progress=False, threads=1, stop_after_epochs=1, device="cpu")
        again = train(cfg2, store, progress=False, threads=1, resume=True, device="cpu")
    assert again.info["resumed_numerics"] is None and again.info["resumed_threads"] == 1


def test_validation_is_generic_over_config_fields():
    """A field added to ModelConfig is type-checked from its annotation without more code."""
    import dataclasses

    from workbench.model.config import Range, check_fields

    @dataclasses.dataclass
    class Schema:
        width: int
        ratio: float | None
        names: list[str]

    check_fields({"width": 3, "ratio": None, "names": ["a"]}, Schema, "x", {"width": Range(1, 4)})
    for bad, msg in (({"width": 5}, r"x\.width=5: must be an integer in \[1, 4\]"),
                     ({"width": 2.0}, "x.width=2.0"), ({"ratio": "nan"}, "x.ratio"),
                     ({"ratio": float("nan")}, "finite"), ({"names": [1]}, r"x\.names\[0\]=1"),
                     ({"other": 1}, "unknown x fields")):
        with pytest.raises(ValueError, match=msg):
            check_fields(bad, Schema, "x", {"width": Range(1, 4)})


def test_memory_check_states_the_estimate():
    from workbench.train.presets import base_config, check_memory

    cfg = base_config("smoke", sets=["model.d_model=32768", "model.n_heads=4"])
    cfg["model"] |= {"vocab_size": 40, "n_classes": 10, "max_len": 24}
    cfg["train"]["eval_batch_size"] = 256
    with pytest.raises(ValueError, match=r"M parameters.*needs about [\d.]+ GB of memory.*GB available"):
        check_memory(cfg, n_train=1600, seq_len=24)
    check_memory(base_config("smoke") | {"model": cfg["model"] | {"d_model": 32}}, n_train=1600, seq_len=24)


def test_compare_checks_its_outputs_before_it_writes_anything(tmp_path):
    """A README outside the folder above the results (its block links them relatively), one without a findings
    block, or a figure format that cannot be exported: a clear error, and no COMPARISON.md written."""
    results = Path(__file__).resolve().parents[1] / "results" / "paper"
    out = tmp_path / "c.md"
    other = tmp_path / "other"
    other.mkdir()
    (other / "R.md").write_text("# x\n<!-- findings:start -->\n<!-- findings:end -->\n")
    (tmp_path / "plain.md").write_text("# no block\n")
    for extra, words in (([ "--readme", str(other / "R.md")], ["--readme", "must be in", "or below"]),
                         (["--readme", str(tmp_path / "plain.md")], ["no <!-- findings:start -->"]),
                         (["--figure", str(tmp_path / "t1.gif")], ["cannot export to 'gif'", ".png"]),
                         (["--paper", str(tmp_path / "plain.md")], ["--paper", "not a folder"])):
        r = invoke(["compare", str(results), "--out", str(out)] + extra)
        assert_clear_error(r, words, extra)
        assert not out.exists(), extra


@pytest.mark.parametrize("cmd", ["recreate", "verify"])
def test_an_unknown_shipped_run_is_refused_before_your_store_is_made(tmp_path, cmd):
    results = Path(__file__).resolve().parents[1] / "results" / "paper"
    r = invoke([cmd, "nosuchrun", "--shipped", str(results), "--root", str(tmp_path / "rc")])
    assert_clear_error(r, ["nosuchrun"], cmd)
    assert not (tmp_path / "rc").exists()
    (tmp_path / "empty").mkdir()
    if cmd == "verify":  # nothing to draw from: said, and no store made
        r = invoke([cmd, "--sample", "3", "--shipped", str(tmp_path / "empty"), "--root", str(tmp_path / "rc")])
        assert_clear_error(r, ["no finished shipped run in", "--shipped"], cmd)
        assert not (tmp_path / "rc").exists()
    if cmd == "recreate":  # a thread count out of range too, before the store is made
        rid = sorted(p.name for p in results.iterdir() if (p / "config.json").exists())[0]
        r = invoke([cmd, rid, "--shipped", str(results), "--root", str(tmp_path / "rc"), "--threads", "100000"])
        assert_clear_error(r, ["--threads", "from 1 to"], cmd)
        assert not (tmp_path / "rc").exists() and "created the run store" not in r.output


@pytest.mark.parametrize("value", ["[0,1", "01", "1"])
def test_rope_layers_that_is_not_a_list_says_how_to_write_one(env, value):
    """A malformed list (`[0,1`, read as the string) was checked one character at a time ("entry '[' must be in
    0..1"), and `01` read as "entry '0' must be in 0..1", though 0 is in range."""
    r = invoke(TRAIN + ["--root", str(env / "runs"), "--dry-run", "--set", f"model.scheme_kwargs.rope_layers={value}"])
    assert_clear_error(r, ["is not a list of layers", "rope_layers=[0,1]"], value)
    assert not (env / "runs").exists()


@pytest.mark.parametrize("text,words", [
    (b"\xff\xfe", ["not a UTF-8 text file", "grid.toml"]),
    (b'preset = "smoke"\nschemes = ["rope"]\nseeds = []\n', ["seeds = [] leaves no grid point"]),
])
def test_a_grid_mistake_is_named_before_the_store_is_made(env, text, words):
    """A grid that is not text, or an empty axis (it said "it names no schemes"): a clear error naming it. (Two
    variants of one name are allowed: grids/ladder.toml names a rung's variant as its scheme at every rung.)"""
    grid = env / "grid.toml"
    grid.write_bytes(text)
    r = invoke(["sweep", str(grid), "-q", "--dry-run", "--root", str(env / "runs")])
    assert_clear_error(r, words, text)
    assert not (env / "runs").exists()


def test_tags_on_a_grid_without_variants_says_so(env):
    grid = env / "grid.toml"
    grid.write_text('preset = "smoke"\nschemes = ["rope"]\n')
    r = invoke(["sweep", str(grid), "--tags", "rope", "-q", "--root", str(env / "runs")])
    assert_clear_error(r, ["this grid has none", "leave out --tags"], "--tags rope")


def test_a_damaged_stored_run_says_force_trains_it_again(env):
    """`train` of a config whose stored run has a corrupted config.json named the file but not the way out."""
    args = TRAIN + ["--root", str(env / "runs"), "--set", "train.epochs=1", "--set", "task.n_examples=200"]
    assert invoke(args).exit_code == 0
    (cfg,) = (env / "runs").glob("t1-*/config.json")
    cfg.write_text('{"broken')
    r = invoke(args)
    assert_clear_error(r, ["config.json", "corrupted", "with --force deletes run"], "damaged config")
    assert invoke(args + ["--force"]).exit_code == 0


def test_a_path_that_is_a_file_is_named_as_one(tmp_path):
    """--root, ship --to and data make -o naming a file said "File exists"; now: a file, not a folder."""
    f = tmp_path / "afile"
    f.write_text("x")
    from workbench.store import RunStore, StoreError

    with pytest.raises(StoreError, match="it is a file, not a folder"):
        RunStore(f)
    results = Path(__file__).resolve().parents[1] / "results" / "paper"
    r = invoke(["ship", "t1-rope-paper-s42", "--root", str(results), "--to", str(f)])
    assert_clear_error(r, ["it is a file, not a folder"], "ship --to")
    r = invoke(["data", "make", "-p", "smoke", "-o", str(f)])
    assert r.exit_code == 2 and "is a file, not a folder" in r.output
