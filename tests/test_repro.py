"""The shipped reproduction: analyse + ship without weights, COMPARISON.md from the tables alone, verify by re-training,
and the claim verdicts on tables whose answer is known."""
import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from workbench.analysis.claims import Thresholds, claims, mean_ci, run_table, table1
from workbench.store import RunStore
from workbench.store.manifest import write_manifest
from workbench.train import resolve_config, train

TINY = ["model.d_model=16", "model.n_heads=2", "model.d_ff=32", "model.n_layers=2", "task.n_examples=400",
        "train.batch_size=32", "train.epochs=2", "train.batching=length"]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    """Three tiny finished runs, analysed and shipped to a results folder."""
    base = tmp_path_factory.mktemp("repro")
    data = base / "data"
    own = RunStore(base / "runs", data_dir=data)
    ids = []
    for scheme, task in (("rope", "trigger-distance"), ("nope", "trigger-distance"), ("rope", "trigger-count")):
        cfg = resolve_config("smoke", scheme, task, sets=TINY, store=own)
        ids.append(train(cfg, own, progress=False, threads=1).id)
    from workbench.cli import app

    res = CliRunner().invoke(app, ["ship", *ids, "--to", str(base / "results"), "--n-boot", "50", "--root",
                                   str(base / "runs")], env={"PELAB_DATA": str(data)})
    assert res.exit_code == 0, res.output
    return base, ids


def test_shipped_runs_have_everything_but_weights(shipped):
    base, ids = shipped
    results = RunStore(base / "results", readonly=True)
    assert sorted(results.run_ids()) == sorted(ids)
    for rid in ids:
        folder = base / "results" / rid
        names = {p.name for p in folder.iterdir()}
        # one file for all tables, and the manifest of what was shipped (code.diff when trained from a dirty tree)
        assert {"config.json", "run.json", "metrics.jsonl", "tables.parquet", "manifest.json"} == names - {"code.diff"}
        tables = set(results.get(rid).tables())
        assert {"ablation", "deposit", "ablation_mean", "deposit_mean", "qk_means", "spectral"} <= tables
        info = json.loads((folder / "run.json").read_text())
        assert info["weights_shipped"] is False and info["code_version"] and info["threads"] == 1
        assert info["machine"]["cores"] >= 1 and info["cpu_time_s"] > 0 and info["wall_time_s"] > 0
        run = results.get(rid)
        assert run.status == "finished" and len(run.metrics()) == 2
    assert not (base / "results" / "index.sqlite").exists()


def test_shipped_tables_are_compact_and_keep_every_value(shipped):
    """Shipped tables are float32 / zstd copies in one file: the same rows, columns, integers and strings; floats
    within float32 rounding; smaller on disk than the run store's own tables."""
    base, ids = shipped
    own, results = RunStore(base / "runs", readonly=True), RunStore(base / "results", readonly=True)
    for rid in ids:
        src, dst = own.get(rid), results.get(rid)
        assert dst.tables() == src.tables()
        for name in src.tables():
            a, b = src.load_table(name), dst.load_table(name)
            assert list(a.columns) == list(b.columns) and len(a) == len(b), name
            for c in a.columns:
                if a[c].dtype == np.float64:
                    assert b[c].dtype == np.float32, (name, c)
                    np.testing.assert_allclose(b[c].to_numpy(np.float64), a[c].to_numpy(), rtol=1e-6, atol=1e-30,
                                               err_msg=f"{name}.{c}")
                else:
                    pd.testing.assert_series_equal(a[c], b[c], check_dtype=False, obj=f"{name}.{c}")
        assert (dst.path / "tables.parquet").stat().st_size < \
            0.8 * sum(p.stat().st_size for p in (src.path / "tables").glob("*.parquet"))


@pytest.mark.slow
def test_comparison_is_generated_from_the_tables_alone_and_is_stable(shipped):
    base, ids = shipped
    from workbench.cli import app

    out = base / "results" / "COMPARISON.md"
    res = CliRunner().invoke(app, ["compare", str(base / "results"), "--grid", "grids/repro.toml"])
    assert res.exit_code == 0, res.output
    first = out.read_text()
    res = CliRunner().invoke(app, ["compare", str(base / "results"), "--grid", "grids/repro.toml"])
    assert out.read_text() == first  # byte-identical
    assert "## Table 1" in first and "## The paper's claims" in first and "## What differs" in first
    runs = run_table(RunStore(base / "results", readonly=True))
    rope_t1 = runs[(runs.variant == "rope") & (runs.task == "trigger-distance")].test_acc.iloc[0]
    assert f"{100 * rope_t1:.2f} [" in first and "(1 seed)" in first  # the number comes from the shipped metrics
    assert "repro tier 1:" in first  # the repro grid's points are listed as pending (these are smoke runs)
    assert first.index("Read this first") < first.index("## What was run")  # the disclaimer comes first
    for rid in ids:
        assert f"[{rid}]({rid}/)" in first
    readme = base / "README.md"
    readme.write_text("# x\n<!-- findings:start -->\nold\n<!-- findings:end -->\nrest\n")
    for _ in range(2):
        res = CliRunner().invoke(app, ["compare", str(base / "results"), "--grid", "grids/repro.toml", "--readme",
                                       str(readme)])
        assert res.exit_code == 0, res.output
    text = readme.read_text()
    assert "old" not in text and text.endswith("rest\n") and text.count("findings:start") == 1
    assert "Task 1 PE-Lab" in text and "(results/COMPARISON.md)" in text
    from workbench.figures.export import find_browser
    if find_browser():  # the study map exported and shown in the block (static export needs chromium)
        res = CliRunner().invoke(app, ["compare", str(base / "results"), "--grid", "grids/repro.toml", "--readme",
                                       str(readme), "--study-figure", str(base / "img" / "study.svg")])
        assert res.exit_code == 0, res.output
        assert (base / "img" / "study.svg").read_text().startswith("<svg")
        assert "](img/study.svg)" in readme.read_text() and "- no study run has finished yet" in readme.read_text()


def test_comparison_names_the_runs_shipped_without_a_deposit_table(shipped, tmp_path):
    """A run shipped with metrics only is listed under the deposit table, not silently left out of it."""
    import shutil

    from workbench.cli import app

    base, ids = shipped
    results = tmp_path / "results"
    shutil.copytree(base / "results", results)
    (results / ids[1] / "tables.parquet").unlink()
    write_manifest(results / ids[1])  # shipped that way (else it is a damaged run)
    res = CliRunner().invoke(app, ["compare", str(results), "--grid", "grids/repro.toml"])
    assert res.exit_code == 0, res.output
    section = (results / "COMPARISON.md").read_text().split("## Every single-head deposit")[1].split("\n## ")[0]
    listed, note = section.split("Shipped without a deposit table")
    assert f"[{ids[1]}]({ids[1]}/)" in note and f"[{ids[1]}]" not in listed
    assert all(f"[{r}]" in listed and f"[{r}]" not in note for r in (ids[0], ids[2]))


def test_verify_retrains_a_shipped_run_and_matches(shipped, tmp_path):
    base, ids = shipped
    from workbench.cli import app

    res = CliRunner().invoke(app, ["verify", ids[1], "--shipped", str(base / "results"), "--root",
                                   str(tmp_path / "mine"), "-q", "--tol", "0"],
                             env={"PELAB_DATA": str(base / "data")})
    assert res.exit_code == 0, res.output
    assert "bit-identical" in res.output
    assert RunStore(tmp_path / "mine").get(ids[1]).status == "finished"
    # every table it was shipped with, recomputed from the re-trained weights (in memory, at the shipped run's one
    # thread), agrees: the head ablations and deposits, and what the head summary joins (patching, probes, dla)
    src = RunStore(base / "results", readonly=True).get(ids[1])
    shipped_tables, n = src.tables(), src.provenance_of("probes")["numerics"]["threads"]  # the count they were made on
    assert {"ablation", "deposit", "patching", "probes", "dla", "head_summary", "qk_means"} <= set(shipped_tables)
    for table in shipped_tables:
        line = next((ln for ln in res.output.splitlines() if ln.startswith(f"{table}: ")), None)
        assert line and line.startswith(
            f"{table}: recomputed from the re-run's weights (bootstrap 50 on 120 test examples, as shipped; {n} "
            f"thread{'s' if n > 1 else ''}): "
            "every value equals the shipped table's (floats at its float32 precision)") and line.endswith("; agrees")
    assert "  the same sentence: NoPE, Task 1:" in res.output
    assert "not shipped with this run, not re-checked: " in res.output  # e.g. attribution (not in ship's suite)
    assert "tables recomputed from its weights agree with the shipped ones" in res.output
    assert "made by an earlier analysis" not in res.output  # shipped by today's code: every table judged


def test_verify_recomputes_the_shipped_head_ablation_and_fails_on_one_the_weights_do_not_give(shipped, tmp_path):
    """A shipped run whose ablation table (consistent with its manifest) is not what its weights give: one head's
    delta moved by 0.2. The metrics re-train bit for bit, the recomputed table differs there: NOT verified, exit 1.
    The recomputation writes nothing to the re-run's folder; `--tables none` checks the metrics only, and a table
    name that cannot be re-checked is refused before anything trains."""
    import shutil

    from workbench.cli import app
    from workbench.store.bundle import BUNDLE, bundle_bytes

    base, ids = shipped
    fake, rid = tmp_path / "results", ids[0]
    shutil.copytree(base / "results" / rid, fake / rid)
    run = RunStore(fake, readonly=True).get(rid)
    tables = {n: run.load_table(n) for n in run.tables()}
    abl = tables["ablation"]
    abl.loc[(abl["layer"] == 1) & (abl["head"] == 0) & (abl["metric"] == "accuracy"), "delta"] += 0.2
    (fake / rid / BUNDLE).write_bytes(bundle_bytes(tables))
    write_manifest(fake / rid)  # a consistent fake (else it reads as damaged)
    env = {"PELAB_DATA": str(base / "data")}
    mine = tmp_path / "mine"
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(mine), "-q", "--tol", "0"],
                             env=env)
    assert res.exit_code == 1, res.output
    assert "ablation: recomputed from the re-run's weights" in res.output and "in delta; DIFFERS" in res.output
    assert "deposit: recomputed" in res.output and "; agrees" in res.output.split("deposit: recomputed")[1]
    assert ("NOT verified: the metrics agree (bit-identical), but the shipped ablation table is not what the "
            "re-trained weights give") in res.output
    assert "note: the shipped ablation table records no maker" in res.output  # the fake bundle dropped it
    made = {n: run.provenance_of(n) or {"analysed": "2026-12-07T00:00:00+00:00"} for n in tables}
    (fake / rid / BUNDLE).write_bytes(bundle_bytes(tables, made))  # the same wrong table, its maker on record
    write_manifest(fake / rid)
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(mine), "-q", "--tol", "0"],
                             env=env)
    assert res.exit_code == 1 and "NOT verified" in res.output and "records no maker" not in res.output, res.output
    own = RunStore(mine).get(rid)
    before = {p.name: p.stat().st_mtime_ns for p in own.path.rglob("*") if p.is_file()}
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(mine), "-q"], env=env)
    assert res.exit_code == 1  # the own copy (checked out) is used again, and judged the same
    assert {p.name: p.stat().st_mtime_ns for p in own.path.rglob("*") if p.is_file()} == before  # nothing written
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(mine), "-q", "--tables",
                                   "none"], env=env)
    assert res.exit_code == 0 and "recomputed" not in res.output, res.output
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(tmp_path / "other"), "-q",
                                   "--tables", "ablation,probs"], env=env)
    assert res.exit_code != 0 and "'probs' cannot be re-checked; pick from ablation, deposit" in res.output
    assert "'all', or 'none'" in res.output
    assert not (tmp_path / "other" / rid).exists()  # refused before training


def test_verify_fails_when_the_shipped_metrics_differ(shipped, tmp_path):
    base, ids = shipped
    import shutil

    from workbench.cli import app

    fake = tmp_path / "results"
    shutil.copytree(base / "results" / ids[1], fake / ids[1])
    rows = [json.loads(line) for line in (fake / ids[1] / "metrics.jsonl").read_text().splitlines()]
    rows[-1]["test_acc"] += 0.01
    (fake / ids[1] / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_manifest(fake / ids[1])  # a consistent fake (else it reads as damaged)
    res = CliRunner().invoke(app, ["verify", ids[1], "--shipped", str(fake), "--root", str(tmp_path / "mine"), "-q"],
                             env={"PELAB_DATA": str(base / "data")})
    assert res.exit_code == 1 and "NOT verified: the recorded numerics match" in res.output
    assert "numerics differ" not in res.output  # same machine: the difference is not explained away


def test_a_recomputed_table_is_compared_and_read_at_the_shipped_precision():
    """Shipped tables hold float32 values: a recomputed float64 table equals its float32 copy at that precision,
    and a deposit interval at a rounding edge (0.725 in float64 reads 0.72, its float32 0.7250000 reads 0.73) is
    read from it as from the shipped table (seen on t2-mla-repro-s42-901034: '[0.67, 0.73]' shipped)."""
    from workbench.analysis.reproduce import as_shipped, table_agreement

    mine = pd.DataFrame({"layer": [0, 1], "pattern": ["single", "none"], "delta": [0.725, 0.1 + 0.2],
                         "n": [1000, 1000]})
    shipped = as_shipped(mine)
    assert list(shipped.dtypes.astype(str)) == ["int64", "object" if mine.pattern.dtype == object
                                                else str(mine.pattern.dtype), "float32", "int64"]
    assert f"{mine.delta[0]:.2f}" == "0.72" and f"{shipped.delta[0]:.2f}" == "0.73"
    assert table_agreement(shipped, mine)["equal"]  # compared at float32
    moved = mine.assign(delta=[0.725, 0.31])
    a = table_agreement(shipped, moved)
    assert not a["equal"] and a["column"] == "delta" and a["max_abs"] == pytest.approx(0.01, abs=1e-6)
    assert not table_agreement(shipped, mine.assign(pattern=["none", "none"]))["equal"]
    # an infinity against a finite value (or the other infinity) is the largest difference there is, not dropped
    # (it read "largest |difference| 0 in None"); equal infinities and NaN against NaN agree
    for other in (math.inf, -math.inf):
        a = table_agreement(as_shipped(mine.assign(delta=[math.inf, 0.3])), mine.assign(delta=[other, 0.3]))
        assert a["equal"] == (other == math.inf) and a["max_abs"] == (0.0 if other == math.inf else math.inf)
    a = table_agreement(as_shipped(mine.assign(delta=[math.inf, 0.3])), mine)
    assert not a["equal"] and a["max_abs"] == math.inf and a["column"] == "delta"
    assert table_agreement(as_shipped(mine.assign(delta=[math.nan, 0.3])), mine.assign(delta=[math.nan, 0.3]))["equal"]


def test_verify_draws_a_sample_and_names_which_of_several_runs_verify(shipped, tmp_path):
    """`verify --sample 2 --seed 1` draws two of the three shipped runs (printed; the same draw on any machine),
    verifies each and ends with a line a run; a named run that is not shipped is refused before anything trains;
    one run that fails makes the exit status 1 and is named in the summary."""
    import random
    import shutil

    from workbench.cli import app

    base, ids = shipped
    env, mine = {"PELAB_DATA": str(base / "data")}, tmp_path / "mine"
    where = ["--root", str(mine), "-q", "--tables", "none"]
    res = CliRunner().invoke(app, ["verify", "--sample", "2", "--seed", "1", "--shipped", str(base / "results"),
                                   *where], env=env)
    drawn = random.Random(1).sample(sorted(ids), 2)
    assert res.exit_code == 0, res.output
    assert (f"drawn with --seed 1 from the 3 finished runs of {base / 'results'} this machine can re-train: "
            f"{', '.join(drawn)}") in res.output
    assert res.output.index(f"-- {drawn[0]} (1 of 2, ") < res.output.index(f"-- {drawn[1]} (2 of 2, ")
    assert res.output.rstrip().endswith(f"2 of 2 runs verified\n  {drawn[0]}: verified\n  {drawn[1]}: verified")
    res = CliRunner().invoke(app, ["verify", ids[0], "t1-rope-smoke-s42-000000", "--shipped",
                                   str(base / "results"), "--root", str(tmp_path / "other"), "-q"], env=env)
    assert res.exit_code != 0 and "t1-rope-smoke-s42-000000" in res.output
    assert not (tmp_path / "other" / ids[0]).exists()  # refused before the first run trained
    fake = tmp_path / "results"
    for rid in ids[:2]:
        shutil.copytree(base / "results" / rid, fake / rid)
    rows = [json.loads(line) for line in (fake / ids[1] / "metrics.jsonl").read_text().splitlines()]
    rows[-1]["test_acc"] += 0.01  # a shipped run whose training gave other numbers: its run.json records them
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (fake / ids[1] / "metrics.jsonl").write_text(text)
    info = json.loads((fake / ids[1] / "run.json").read_text())
    info["metrics_sha256"] = hashlib.sha256(text.encode()).hexdigest()
    (fake / ids[1] / "run.json").write_text(json.dumps(info))
    write_manifest(fake / ids[1])
    res = CliRunner().invoke(app, ["verify", ids[0], ids[1], "--shipped", str(fake), *where], env=env)
    assert res.exit_code == 1, res.output
    assert f"1 of 2 runs verified\n  {ids[0]}: verified\n  {ids[1]}: NOT verified" in res.output
    import torch

    if not torch.cuda.is_available():  # a run trained on a GPU is never drawn, and refused by name, on a CPU
        shutil.copytree(base / "results" / ids[2], fake / ids[2])
        info = json.loads((fake / ids[2] / "run.json").read_text())
        (fake / ids[2] / "run.json").write_text(json.dumps(info | {"device": "cuda", "gpu": "NVIDIA H200"}))
        write_manifest(fake / ids[2])
        res = CliRunner().invoke(app, ["verify", "--sample", "3", "--shipped", str(fake), *where], env=env)
        assert "from the 2 finished runs of" in res.output and "(1 trained on a GPU left out: no CUDA GPU here)" \
            in res.output and f"-- {ids[2]}" not in res.output
        res = CliRunner().invoke(app, ["verify", ids[0], ids[2], "--shipped", str(fake), *where], env=env)
        assert res.exit_code != 0 and f"run {ids[2]!r}: cannot re-check it here: it was trained on a GPU" in res.output
        assert "-- " not in res.output  # refused before the first run


def test_machine_identity_records_the_cpu_vendor_and_simd_level():
    import torch  # noqa: F401  (loaded: the SIMD level torch dispatches to is recorded)

    from workbench.store.run import machine_identity, numerics_differences, numerics_identity, recorded_numerics

    m = machine_identity()
    assert m["cpu"] and m["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    n = numerics_identity()
    assert n["cpu_capability"] == m["cpu_capability"] and n["torch"] == torch.__version__ and n["blas"]
    assert numerics_differences(n, dict(n)) == {}
    other = "DEFAULT" if n["cpu_capability"] != "DEFAULT" else "AVX2"  # a level that is not this machine's
    assert numerics_differences(dict(n, cpu_capability=other), n) == {"cpu_capability": (other, n["cpu_capability"])}
    # a run.json from before `numerics`: what it recorded elsewhere, the rest unknown (so never "the same")
    old = recorded_numerics({"torch_version": n["torch"], "threads": n["threads"], "machine": m})
    assert old["torch"] == n["torch"] and old["mkl"] is None and "mkl" in numerics_differences(old, n)


def test_mean_ci_is_the_student_t_interval():
    m, lo, hi, n = mean_ci([0.9, 0.92, 0.97])
    assert n == 3 and m == pytest.approx(0.93)
    assert hi - m == pytest.approx(4.302652729 * np.std([0.9, 0.92, 0.97], ddof=1) / np.sqrt(3))
    assert np.isnan(mean_ci([0.5])[1]) and mean_ci([])[3] == 0


class FakeRun:
    """A run with tables made by today's analyses (no provenance: made when shipped, today)."""

    def __init__(self, rid, tables, metrics=None):
        self.id, self._tables, self._metrics = rid, tables, pd.DataFrame(metrics or [])
        self.info, self.config = {"shipped": "2026-12-31T00:00:00+00:00"}, {}

    def provenance_of(self, name):
        return None

    def metrics(self):
        return self._metrics

    def tables(self):
        return list(self._tables)

    def load_table(self, name):
        return self._tables[name]


class FakeStore:
    def __init__(self, runs):
        self._runs = {r.id: r for r in runs}

    def get(self, rid):
        return self._runs[rid]


def _deposit(single_layers, n_layers=4):
    return pd.DataFrame([{"layer": l, "metric": "accuracy", "single_head_deposit": l in single_layers,
                          "average_deposit": False, "top_head": 3, "top_delta": 0.4 if l in single_layers else 0.01,
                          "top_lo": 0.3, "top_hi": 0.5} for l in range(n_layers)])


def _runs_frame(rows):
    """A run table by hand; what a run can show defaults to its final accuracy alone (learned: >= 0.28; ceiling:
    >= 0.98; settled and not still learning unless a row says so; data seed 42)."""
    base = {"setting": "paper", "partial": False, "preset": "repro", "data_seed": 42, "train_acc": 1.0,
            "test_acc_epoch1": 0.5,
            "epochs": 3, "wall_time_s": 1.0, "cpu_time_s": 1.0, "threads": 1, "code_version": "x", "cpu": "y",
            "simd": None, "cpu_vendor": None,
            "train_acc_eval": np.nan, "n_test": 6000, "chance": 1 / 26, "length_only": 0.18, "reference": 0.18,
            "still_learning": False, "diverged": False}
    out = []
    for r in rows:
        r = base | r
        r.setdefault("learned", r["test_acc"] >= 0.28)
        r.setdefault("ceiling", r["test_acc"] >= 0.98)
        r.setdefault("settled", not r["still_learning"])
        r.setdefault("status", ("ceiling" if r["ceiling"] else "still learning" if r["still_learning"] else "learned")
                     if r["learned"] else "did not learn")
        r.setdefault("why", f"test acc {r['test_acc']:.3f}")
        out.append(r)
    return pd.DataFrame(out)


def test_claim_verdicts_follow_the_seeds():
    """RoPE's largest deposit in layer 0 in seeds 42 and 45, layers 1 and 3 in seeds 43 and 44: 2 of 4, mixed (few
    runs); 3 of these seeds would be too few to decide (registered min_counted 4)."""
    rows, runs = [], []
    for seed, layers in ((42, [0]), (43, [1]), (44, [3]), (45, [0])):
        rid = f"rope-{seed}"
        rows.append({"run_id": rid, "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": seed,
                     "test_acc": 0.99, "test_acc_auc": 0.9})
        runs.append(FakeRun(rid, {"deposit": _deposit(layers)}))
        rid = f"nope-{seed}"
        rows.append({"run_id": rid, "variant": "nope", "scheme": "nope", "task": "trigger-distance", "seed": seed,
                     "test_acc": 0.15, "test_acc_auc": 0.1, "train_acc": 0.16})
        runs.append(FakeRun(rid, {"deposit": _deposit([])}))
    frame = _runs_frame(rows)
    cl = claims(FakeStore(runs), frame, Thresholds())
    verdict = dict(zip(cl.claim + "|" + cl.setting, cl.verdict))
    assert verdict["RoPE's largest single-head deposit is in the first layer (layer 0) on Task 1|paper"] == "mixed"
    # NoPE at 0.15 did not learn: nothing to deposit, so its "no deposit" is not evidence
    assert verdict["no deposit for NoPE on Task 1|paper"] == "inconclusive (did not learn)"
    assert verdict["RoPE converges fastest on Task 1|paper"] == "pending"  # a ranking needs the paper's six schemes
    # 4 of 4 agree ([0.51, 1.00]) and RoPE, which learned in all 4, fails the same rule: specific
    assert verdict["NoPE does not generalise on Task 1|paper"] == "reproduced"
    three = claims(FakeStore(runs), frame[frame.seed < 45], Thresholds())
    v3 = dict(zip(three.claim + "|" + three.setting, three.verdict))
    assert v3["RoPE's largest single-head deposit is in the first layer (layer 0) on Task 1|paper"] == \
        v3["NoPE does not generalise on Task 1|paper"] == "inconclusive (too few seeds)"
    assert verdict["no deposit for ALiBi on Task 1|paper"] == "pending"
    t1 = table1(frame)
    r = t1[(t1.scheme == "rope") & (t1.task == "trigger-distance")].iloc[0]
    assert r.n_seeds == 4 and r.paper == pytest.approx(0.9264) and r["mean"] == pytest.approx(0.99)
    spread = _runs_frame([{"run_id": f"n{s}", "variant": "nope", "scheme": "nope", "task": "trigger-count",
                           "seed": s, "test_acc": a, "test_acc_auc": a} for s, a in ((42, 0.99), (43, 0.6))])
    n = table1(spread).iloc[0]
    assert n.hi == 0.99 and n.lo == 0.6 and n["mean"] == pytest.approx(0.795), "the seeds' range, not a t interval"
    others = [{"run_id": f"{s}-42", "variant": s, "scheme": s, "task": "trigger-distance", "seed": 42,
               "test_acc": 0.5, "test_acc_auc": 0.3 + 0.01 * i}
              for i, s in enumerate(("sinusoidal", "learned", "random", "relative", "alibi", "rope+sinusoidal", "mla"))]
    ranked = claims(FakeStore(runs + [FakeRun(r["run_id"], {}) for r in others]), _runs_frame(rows + others),
                    Thresholds())
    row = ranked[ranked.claim == "RoPE converges fastest on Task 1"].iloc[0]
    # ranked among the paper's six schemes, not tier 1's nine; the repro optimiser was tuned on RoPE: not testable
    assert row.verdict == "not testable at this preset"
    assert "seed 42: rank 1 of 6 (agrees)" in row.evidence and "seed 43" not in row.evidence
    second = ranked[ranked.claim.str.startswith("absolute (sinusoidal) converges second")].iloc[0]
    assert "seed 42: rank 5 of 6 (does not)" in second.evidence  # only NoPE (0.1) is below sinusoidal (0.3)
    # the paper's first layer decides: seed 43 (layer 1) disagrees; layer <= 1 is only the second reading
    ev = cl[cl.claim.str.startswith("RoPE's largest")].evidence.iloc[0]
    assert "seed 43: single-head deposit L1.H3 0.40 [0.30, 0.50] (does not)" in ev
    assert "second reading (largest deposit in layer <= 1, never deciding): 3 of 4" in ev


def test_claims_name_unanalysed_seeds_and_compare_paired_seeds_only():
    """A trained run without its tables yet is named in the evidence (not silently dropped); a Table 1 ordering
    compares only seeds where both runs finished (no 'vs nan')."""
    rows, runs = [], []
    for seed in (42, 43, 44):
        rows.append({"run_id": f"rope-{seed}", "variant": "rope", "scheme": "rope", "task": "trigger-distance",
                     "seed": seed, "test_acc": 0.99, "test_acc_auc": 0.9})
        runs.append(FakeRun(f"rope-{seed}", {"deposit": _deposit([0])} if seed == 42 else {}))
    rows.append({"run_id": "mla-42", "variant": "mla", "scheme": "mla", "task": "trigger-distance", "seed": 42,
                 "test_acc": 0.9, "test_acc_auc": 0.8})
    runs.append(FakeRun("mla-42", {}))
    cl = claims(FakeStore(runs), _runs_frame(rows))
    dep = cl[cl.claim.str.startswith("RoPE's largest single-head") & (cl.setting == "paper")].iloc[0]
    # one seed analysed, one paired: 1 of 1 is too few (registered min_counted 4), whatever it shows; one pair
    # cannot decide an order
    assert dep.verdict == "inconclusive (too few seeds)"
    assert "seed 43, 44: trained, deposit not computed yet" in dep.evidence
    order = cl[cl.claim.str.startswith("RoPE beats MLA") & (cl.setting == "paper")].iloc[0]
    assert order.verdict == "inconclusive (few pairs)" and "nan" not in order.evidence
    assert ("1 paired seed(s) RoPE 0.990 vs MLA 0.900; per seed (RoPE vs MLA) 42: 0.990 (ceiling) vs 0.900 "
            "(learned)") in order.evidence  # each side named: which number is RoPE's


def test_partial_rope_claim_reads_the_layer_of_the_largest_deposit():
    """Appendix C.3 (registered `partial-rope-deeper`): partial RoPE's *most significant* deposit "may be in the
    second or third layer": a run agrees when its largest single-head deposit is in layer 1 or 2 (0-based), even
    with a smaller one in layer 0; a run whose largest is in layer 0 or deeper than 2 does not. Full RoPE's of the
    same seed is shown beside."""
    def dep(deltas):  # layer -> top drop of its single-head deposit
        return pd.DataFrame([{"layer": l, "metric": "accuracy", "single_head_deposit": l in deltas,
                              "average_deposit": False, "top_head": 5, "top_delta": deltas.get(l, 0.01),
                              "top_lo": 0.0, "top_hi": 1.0} for l in range(4)])

    def frame(partials, seed=42):
        rows = [{"run_id": f"rope-{s}", "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": s,
                 "test_acc": 1.0, "test_acc_auc": 0.9} for s in (42, 43)]
        rows += [{"run_id": rid, "variant": rid, "scheme": "rope", "partial": True, "task": "trigger-distance",
                  "seed": seed, "test_acc": 0.9, "test_acc_auc": 0.8} for rid in partials]
        return _runs_frame(rows)

    tables = {"rope-42": dep({1: 0.5}), "rope-43": dep({3: 0.5}), "k1-l0": dep({0: 0.1, 2: 0.3}),
              "k4-all": dep({0: 0.4, 2: 0.2}), "k1-l1": dep({1: 0.3}), "k1-l3": dep({3: 0.3})}
    store = FakeStore([FakeRun(rid, {"deposit": t}) for rid, t in tables.items()])

    def row(partials, seed=42):  # the layer rule on one seed's runs (the ladder's one-seed reading)
        cl = claims(store, frame(partials, seed), Thresholds(min_seeds=1))
        return cl[cl.claim.str.startswith("partial RoPE")].iloc[0]

    yes = row(["k1-l0", "k1-l1"])
    assert yes.verdict == "reproduced"
    assert "k1-l0 seed 42 (test acc 0.900): largest single-head deposit L2.H5 0.30 (agrees), layer 0 has one; " \
           "full RoPE L1.H5 0.50" in yes.evidence
    assert row(["k4-all"]).verdict == "not reproduced"  # largest in layer 0
    assert row(["k1-l3"], seed=43).verdict == "not reproduced"  # layer 3 is deeper than the paper's third layer
    assert row([]).verdict == "pending"


def test_a_model_that_did_not_learn_makes_the_mla_head_claims_inconclusive():
    """'MLA has no indispensable head' is vacuous for a model at chance: such seeds do not count, and with no
    other seed the verdict is inconclusive (not 'reproduced'); the questions section answers 'cannot tell'."""
    from workbench.analysis.claims import answers

    flat = pd.DataFrame([{"layer": l, "head": h, "metric": "accuracy", "delta": 0.001, "ci_lo": -0.01, "ci_hi": 0.01}
                         for l in range(2) for h in range(2)])
    summary = pd.DataFrame([{"layer": 0, "head": 0, "deposit_head": False, "methods": ""}])
    rows = [{"run_id": "mla-42", "variant": "mla", "scheme": "mla", "task": "trigger-distance", "seed": 42,
             "test_acc": 0.14, "test_acc_auc": 0.1, "setting": "authors-mla"},
            {"run_id": "mla-43", "variant": "mla", "scheme": "mla", "task": "trigger-distance", "seed": 43,
             "test_acc": 0.19, "test_acc_auc": 0.1, "setting": "authors-mla"}]
    store = FakeStore([FakeRun("mla-42", {"ablation": flat, "head_summary": summary}), FakeRun("mla-43", {})])
    cl = claims(store, _runs_frame(rows))
    mla = cl[cl.setting == "authors-mla"]
    assert set(mla.verdict) == {"inconclusive (did not learn)"}
    assert all("seed 42: did not learn (test acc 0.140)" in e for e in mla.evidence)
    # an unlearned run is inconclusive before its tables exist: not "waiting" for them
    assert all("seed 43: did not learn (test acc 0.190)" in e and "not computed yet" not in e
               for e in mla.evidence)
    rows = rows[:1]
    a = answers(cl)
    assert set(a[a.setting == "authors' MLA script, Task 1"].answer) == {"cannot tell (the model did not learn)"}
    # the same run having learned the task: its flat ablation is evidence, the claim is reproduced
    rows[0]["test_acc"] = 0.9
    learned = claims(store, _runs_frame(rows), Thresholds(min_seeds=1))  # one seed, to show the rule
    heads = learned[(learned.setting == "authors-mla") & learned.claim.str.startswith("MLA has no indispensable")]
    assert set(heads.verdict) == {"reproduced"}


def test_absolute_pe_needs_a_few_significant_heads_among_many_insignificant_shallow_ones():
    """Appendix C.2 (registered `absolute-shallow-heads`): "some significant heads and some insignificant heads in
    the shallow layer": in layers 0-1, a head drops >= 0.05, at least half drop < 0.01, and the three largest carry
    >= 50 % of the summed drop. Two significant heads of 32 agree; every head significant does not."""
    def atlas(significant):
        return pd.DataFrame([{"layer": l, "head": h, "metric": "accuracy",
                              "delta": 0.3 if (l, h) in significant else 0.002,
                              "ci_lo": 0.2 if (l, h) in significant else -0.01, "ci_hi": 0.4}
                             for l in range(3) for h in range(16)])
    every = {(l, h) for l in range(2) for h in range(16)}
    for significant, verdict in (({(0, 1), (1, 0)}, "reproduced"), (every, "not reproduced")):
        rows = [{"run_id": "abs-42", "variant": "sinusoidal", "scheme": "sinusoidal", "task": "trigger-distance",
                 "seed": 42, "test_acc": 0.99, "test_acc_auc": 0.9}]
        cl = claims(FakeStore([FakeRun("abs-42", {"ablation": atlas(significant)})]), _runs_frame(rows),
                    Thresholds(min_seeds=1))  # one seed, to show the rule
        row = cl[cl.claim.str.startswith("absolute (sinusoidal) has")].iloc[0]
        assert row.verdict == verdict, (significant, row.evidence)
        assert f"seed 42: {len(significant)} of 32 heads in layers 0-1 drop >= 0.05" in row.evidence


def test_findings_page_shows_table1_claims_and_evidence(shipped, tmp_path):
    from apps import create_app
    from apps.pages import findings

    base, ids = shipped
    app = create_app(tmp_path / "own", cache_dir=tmp_path / "cache", shipped=base / "results")
    with app.server.test_request_context("/"):
        page = str(findings.layout())
        assert "Table 1" in page and "find-claims" in page and "RoPE's largest single-head deposit" in page
        assert "find-answers" in page and "Does RoPE put its positional computation in one shallow head" in page
        assert "One setting at a time" in page and "No one-setting-at-a-time runs shipped yet" in page
        assert "Partial RoPE" in page and "No partial-RoPE runs shipped yet" in page
        assert "Every scheme at a glance" in page and "find-overview" in page
        assert "Across scale" in page and "No run of the ladder's other rungs shipped yet" in page  # smoke runs only
        assert "The seed study of the headline claims" in page and "0 of 40 runs shipped" in page
        assert "tier 2: NoPE vs RoPE on Task 2 at `repro-paperdata-long`" in page and "find-study-tier2" in page
        assert "own scale (GPU runs)" in page and "not run yet" in page and "find-paper-table1" not in page
        # the registered rules: each with its version; the share decision's version 2 is said, with what changed
        assert "The registered rules" in page and "find-registration" in page and "rope-deposit-first-layer" in page
        assert "what changed since the registration" in page and "the share decision (`[decision.share]`" in page
        store = findings._shipped()
        runs, t1, cl = findings._tables(store)
        row = cl[cl.claim.str.startswith("RoPE's largest single-head deposit")].index[0]
        ev = str(findings.evidence(store, cl, str(row)))
        assert "zero-ablation atlas" in ev and f"/ablation?run={ids[0]}" in ev
        assert "zero-ablation atlas, one run" in ev
        assert "Pick a claim" in str(findings.evidence(store, cl, "../etc"))
    assert not (base / "results" / "index.sqlite").exists()  # the shipped store was only read


def test_findings_page_shows_the_paper_scale_runs_beside_the_shipped_store(shipped, tmp_path):
    """A run in `paper/` beside the shipped store (results/paper beside results/repro) appears in the page's
    paper-scale card: its Table 1 cell in percent beside the paper's and the CPU mean, what it can show, and the
    claims judged on it; a run added there is seen on the next load (the cache key holds both stores' states)."""
    import shutil

    from apps import create_app
    from apps.pages import findings
    from workbench.store import RunStore

    base, ids = shipped
    root = tmp_path / "results"
    shutil.copytree(base / "results", root, ignore=shutil.ignore_patterns("index.sqlite*"))
    app = create_app(tmp_path / "own", cache_dir=tmp_path / "cache", shipped=root)
    with app.server.test_request_context("/"):
        assert "find-paper-table1" not in str(findings.layout())
        (root.parent / "paper").mkdir()
        shutil.copytree(root / ids[0], root.parent / "paper" / ids[0])
        page = str(findings.layout())
        assert "find-paper-table1" in page and "1 finished `paper`-preset run in results/paper" in page
        t = findings._computed(findings._shipped())
        cells = t["paper_t1"]
        run = RunStore(root.parent / "paper", readonly=True).get(ids[0])
        assert list(cells.runs.iloc[0]) == [ids[0]] and cells["mean"].iloc[0] == pytest.approx(run.final["test_acc"])
        assert cells["cpu_mean"].iloc[0] == pytest.approx(t["table1"].set_index(["setting", "scheme", "task"])
                                                          .loc[tuple(cells.iloc[0][["setting", "scheme", "task"]]),
                                                               "mean"])
        assert len(t["paper_claims"]) and (t["paper_claims"].paper_scale.str.len() > 0).all()
        fig = next(c.figure for c in findings.layout()._traverse() if type(c).__name__ == "Graph"
                   and "Table 1" in str((getattr(c, "figure", None) or {}).get("layout", {}).get("title")))
        marks = [tr for tr in fig["data"] if "paper_scale" in (tr.get("meta") or "")]  # the run's mean on its CPU bar
        assert len(marks) == 1 and marks[0]["y"][1] == pytest.approx(100 * run.final["test_acc"])
        assert "deposit" in run.tables()  # where its largest deposit falls, in the card's deposit map
        assert list(t["paper_deposits"].run_id) == [ids[0]] and "find-paper-deposits" in page


def test_findings_page_on_the_paper_scale_store_itself_says_so(tmp_path):
    """`workbench app --shipped results/paper`: the page judges the GPU runs, titled and described as such (it said
    "re-run on CPU" and "results/repro" whatever it read), with the `paper` preset's disclaimer, and no
    paper-scale card of the store beside itself (`store.paper_root` is None there). Its verdict matrix has no
    column for a setting the store has no run of (the `paper` arch's was all "pending"), its evidence opens on the
    RoPE deposit claim of a setting with runs, and the CPU-only seed study and scale ladder (which said "0 of 40
    runs shipped") are named as being in results/repro."""
    from apps import create_app
    from apps.pages import findings
    from workbench.store import paper_root

    paper = Path(__file__).resolve().parents[1] / "results" / "paper"
    assert paper_root(paper) is None and paper_root(paper.parent / "repro") == paper.parent / "paper"
    app = create_app(tmp_path / "own", cache_dir=tmp_path / "cache", shipped=paper)
    with app.server.test_request_context("/"):
        lay = findings.layout()
        t = findings._computed(findings._shipped())
        m = t["matrix"]
    page = str(lay)
    assert "the core paper at its own scale (GPU runs)" in page and "re-run on CPU" not in page
    assert "paper/COMPARISON.md" in page and "results/repro/COMPARISON.md" not in page
    assert set(m.setting) == set(t["runs"].setting)  # only settings with runs: the window trains the authors' ones
    chosen = next(c.value for c in lay._traverse() if getattr(c, "id", None) == "find-claim")
    row = m[m.claim_no == int(chosen)].iloc[0] if chosen.isdigit() else None  # a base claim's index
    assert row is not None and row.claim.startswith("RoPE's largest single-head") and row.n_seeds >= 2
    assert "The seed study and the scale ladder" in page and "runs shipped (`make study`" not in page
    assert "find-ladder-matrix" in page  # the clicks' callback needs its id
    assert "grids/paper.toml" in page and "grids/repro.toml" not in page  # the folds name its own grid
    assert "Code('paper'), \" preset: the paper's model, data, epochs and optimiser" in page  # its own disclaimer
    assert "bf16 autocast" in page
    assert "find-paper-table1" not in page and "At the paper's own scale (GPU runs)" not in page


@pytest.mark.slow
def test_findings_notebook_executes_on_shipped_results_without_training(shipped, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")

    base, ids = shipped
    monkeypatch.setenv("PELAB_SHIPPED", str(base / "results"))
    path = Path(__file__).resolve().parents[1] / "notebooks" / "00_findings.ipynb"
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=240, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum("application/vnd.plotly.v1+json" in o.get("data", {}) for o in outputs) >= 3
    assert any("Paper scale" in o.get("text", "") and "not run yet" in o.get("text", "") for o in outputs)
    text = "\n".join(o.get("text", "") for o in outputs)
    from workbench.analysis.claims import registration_changes

    # the registered rules, then every change since the registration, one line each, the registry's own words
    assert "What changed since the registration:" in text and registration_changes()
    assert all(f"- {line}" in text for line in registration_changes())
    assert not list((base / "results").glob("*/model.safetensors"))  # nothing was trained into the shipped store


def test_causal_claims_read_the_head_summaries():
    """Seed 42: the ablation deposit head is also marked by >= 2 methods; seed 43: it is not. MLA: seed 42 has a
    head marked by probe and DLA only (no causal vote: agrees), seed 43 one marked by patching and DLA (disagrees)."""
    def summary(paper_heads, agreed, methods="ablation+patching"):
        return pd.DataFrame([{"layer": l, "head": h, "paper_deposit": (l, h) in paper_heads,
                              "deposit_head": (l, h) in agreed, "patch_effect": 0.8, "probe_selectivity": 0.3,
                              "methods": methods if (l, h) in agreed else "ablation"}
                             for l in range(2) for h in range(2)])
    rows, runs = [], []
    for seed, agreed in ((42, {(0, 1)}), (43, set())):
        rid = f"rope-{seed}"
        rows.append({"run_id": rid, "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": seed,
                     "test_acc": 0.99, "test_acc_auc": 0.9})
        runs.append(FakeRun(rid, {"head_summary": summary({(0, 1)}, agreed)}))
        rid = f"mla-{seed}"
        rows.append({"run_id": rid, "variant": "mla", "scheme": "mla", "task": "trigger-distance", "seed": seed,
                     "test_acc": 0.9, "test_acc_auc": 0.8})
        runs.append(FakeRun(rid, {"head_summary": summary(set(), {(1, 0)},
                                                           "probe+dla" if seed == 42 else "patching+dla")}))
    cl = claims(FakeStore(runs), _runs_frame(rows))
    verdict = dict(zip(cl.claim + "|" + cl.setting, cl.verdict))
    result = dict(zip(cl.claim + "|" + cl.setting, cl.result))
    rope = "RoPE's ablation deposit head also carries the distance (>= 2 methods agree), Task 1|paper"
    mla = "MLA has no head that a causal method and a second method mark as a deposit head"
    # the paper used ablation alone: these rows are shown, not counted as tests of it
    assert verdict[rope] == verdict[f"{mla}, Task 1|paper"] == "beyond the paper"
    # 1 of 2 each: what the seeds show is too few to decide (registered min_counted 4)
    assert result[rope] == result[f"{mla}, Task 1|paper"] == "inconclusive (too few seeds)"
    assert verdict[f"{mla}, Task 2|paper"] == "pending"
    ev = cl[(cl.claim == f"{mla}, Task 1") & (cl.setting == "paper")].evidence.iloc[0]
    assert "seed 42: 1 heads with >= 2 votes, 0 with a causal one (probe+dla 1)" in ev


def test_causal_claims_leave_out_a_dla_vote_on_the_mean_margin():
    """A head summary whose dla vote read the margin vs the mean over classes (made before 2026-11-28, or with
    dla_measure "mean") counts without it: the ablation deposit head marked by ablation+dla is then marked by
    ablation alone, and the evidence names the seed. The same votes read on the runner-up margin count."""
    from workbench.analysis import head_summary

    def tables(dla_measure):
        abl, dl = [], []
        for l in range(2):
            for h in range(2):
                d = 0.3 if (l, h) == (0, 1) else 0.0
                abl.append(dict(layer=l, head=h, metric="accuracy", mode="zero", delta=d, ci_lo=d - 0.05,
                                ci_hi=d + 0.05, layer_gap=0.3, layer_gap_lo=0.2, layer_gap_hi=0.4))
                dl.append(dict(component="head", layer=l, head=h, dla_vs_mean=0.9, vs_mean_lo=0.5, vs_mean_hi=1.2,
                               dla_vs_runner_up=0.9, vs_runner_up_lo=0.5, vs_runner_up_hi=1.2))
        return head_summary.compute({"ablation": pd.DataFrame(abl), "dla": pd.DataFrame(dl)}, dla_measure=dla_measure)

    assert head_summary.mean_dla_vote(tables("mean")) and not head_summary.mean_dla_vote(tables("runner_up"))
    hs_old = tables("mean").drop(columns=["dla_measure"])  # as made before 2026-11-28: no dla_measure column
    assert head_summary.mean_dla_vote(hs_old)
    c = head_summary.counted(hs_old)
    assert c["by_dla"].isna().all() and not c["deposit_head"].any() and set(c["methods"]) == {"", "ablation"}
    assert tables("mean")["deposit_head"].sum() == 1  # as stored: ablation+dla
    assert head_summary.counted(tables("runner_up"))["deposit_head"].sum() == 1
    rows, runs = [], []
    for seed, hs in ((42, tables("runner_up")), (43, hs_old)):
        rid = f"rope-{seed}"
        rows.append({"run_id": rid, "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": seed,
                     "test_acc": 0.99, "test_acc_auc": 0.9})
        runs.append(FakeRun(rid, {"head_summary": hs}))
    cl = claims(FakeStore(runs), _runs_frame(rows))
    row = cl[cl.claim.str.startswith("RoPE's ablation deposit head also carries") & (cl.setting == "paper")].iloc[0]
    # the drop the ablation vote read is named (zero ablation here: no resample table)
    assert "seed 42: L0.H1 zero ablation 0.30, patching nan, probe selectivity nan, votes ablation+dla" in row.evidence
    assert "seed 43: L0.H1 zero ablation 0.30, patching nan, probe selectivity nan, votes ablation;" in row.evidence
    assert "seed 43: dla vote left out" in row.evidence and "seed 42: dla vote left out" not in row.evidence
    assert row.result == "inconclusive (too few seeds)"  # 1 of 2


@pytest.fixture(scope="module")
def judged():
    """`base_claims` of a repository store, judged once in this module: `workbench compare --readme` writes the
    shipped COMPARISON.md and the README's block from one judging, and their tests below read one too."""
    from workbench.analysis.claims import base_claims
    from workbench.train.presets import LADDER

    memo = {}

    def of(store):
        if store.root not in memo:
            memo[store.root] = base_claims(store, run_table(store), LADDER)
        return memo[store.root]
    return of


@pytest.mark.slow
@pytest.mark.parametrize("name", ["repro", "paper"])
def test_the_shipped_comparison_is_what_its_tables_give(name, judged):
    """results/repro/COMPARISON.md (and results/paper's, the GPU runs') in the repository is exactly what
    `workbench compare results/<name>` writes (its default grids: grids/paper.toml for the paper store)."""
    from workbench.cli.repro import PENDING_GRIDS
    from workbench.analysis.settings import reproduction_grid
    from workbench.report.comparison import comparison_markdown, pending_points
    from workbench.report.study import registration_commits

    repo = Path(__file__).resolve().parents[1]
    shipped = repo / "results" / name
    if not (shipped / "COMPARISON.md").exists():
        pytest.skip("no shipped results in this checkout")
    store = RunStore(shipped, readonly=True)
    grids = [reproduction_grid("paper")] if name == "paper" else PENDING_GRIDS
    pending = [line for g in grids for line in pending_points(store, repo / g)]
    text, want = comparison_markdown(store, pending=pending or None, judged=judged(store)), \
        (shipped / "COMPARISON.md").read_text()
    if not registration_commits():  # a shallow clone or an export: the rules' commits cannot be read here
        text, want = (re.sub(r"`[0-9a-f]{7}` \(\d{4}-\d\d-\d\d\)|registered \S+ \(no git history here\)", "COMMIT", t)
                      for t in (text, want))
    assert text == want


@pytest.mark.slow
def test_the_shipped_store_and_the_readme_block_are_current_and_within_budget(judged):
    """The repository's results/repro: every run finished, no weights, under the issue's 30 MB; the README's findings
    block is what `make study`'s `workbench compare --readme README.md --figure docs/img/findings_table1.png
    --study-figure docs/img/findings_study.png` writes from it."""
    from workbench.report.comparison import README_END, README_START, readme_block

    repo = Path(__file__).resolve().parents[1]
    shipped = repo / "results" / "repro"
    if not (shipped / "COMPARISON.md").exists():
        pytest.skip("no shipped results in this checkout")
    store = RunStore(shipped, readonly=True)
    assert all(store.get(rid).status == "finished" for rid in store.run_ids())
    files = [p for p in shipped.rglob("*") if p.is_file() and p.name != "index.sqlite"]
    assert not [p for p in files if p.suffix in (".safetensors", ".pt", ".pkl") or p.name == "state.json"]
    assert sum(p.stat().st_size for p in files) < 30e6
    readme = (repo / "README.md").read_text()
    block = readme[readme.index(README_START):readme.index(README_END) + len(README_END)]
    assert block.strip() == readme_block(store, "docs/img/findings_table1.png", "results/repro",
                                         study_figure="docs/img/findings_study.png", judged=judged(store)).strip()


@pytest.mark.parametrize("task", ["trigger-distance", "trigger-count"])
def test_run_ids_from_the_task_spec_equal_those_from_the_data(task, tmp_path):
    """`ship --grid` computes ids without loading datasets: the spec must fix vocab, classes and length as the data do."""
    store = RunStore(tmp_path / "runs", data_dir=tmp_path / "data")
    for scheme, fidelity in (("rope", "pelab"), ("nope", "authors"), ("mla", "authors-mla")):
        cfg = dict(preset="smoke", scheme=scheme, task=task, fidelity=fidelity)
        assert store.run_id(resolve_config(**cfg)) == store.run_id(resolve_config(store=store, **cfg))


def test_one_setting_says_a_change_that_trained_identically_had_no_effect():
    """A pad setting on Task 2 data without pads (max_tokens = seq_len) trains exactly like its baseline: the row
    says so and why; a change whose curve differs by one loss value is read by the seed-spread rule as before."""
    from workbench.analysis.claims import one_setting, one_setting_effect

    curve = [{"epoch": e, "train_loss": 1.0 / e, "test_loss": 1.1 / e, "test_acc": 0.5 + 0.1 * e} for e in (1, 2)]
    bumped = [dict(curve[0]), dict(curve[1], train_loss=0.4)]
    rows, runs = [], []
    for tag, sets, task, m in (("rope", [], "trigger-count", curve),
                               ("rope-with-pad-mask", ["model.attn_pad_mask=true"], "trigger-count", curve),
                               ("rope-final-ln", ["model.final_ln=after_pool"], "trigger-count", bumped)):
        cfg = resolve_config("repro", "rope", task, fidelity="authors", tag=tag, sets=sets)
        run = FakeRun(tag, {}, m)
        run.config = cfg
        runs.append(run)
        rows.append({"run_id": tag, "setting": "authors", "variant": tag, "scheme": cfg["model"]["scheme"],
                     "task": task, "seed": 42, "test_acc": 0.7, "test_acc_auc": 0.7})
    d = one_setting(FakeStore(runs), _runs_frame(rows)).set_index("variant")
    mask, ln = d.loc["rope-with-pad-mask"], d.loc["rope-final-ln"]
    assert mask.identical and mask.pad_free and not ln.identical
    assert "no pad tokens" in one_setting_effect(mask) and "no effect" in one_setting_effect(mask)
    assert "identical" not in one_setting_effect(ln)


def test_config_changes_reads_a_field_added_later_as_the_value_older_runs_had():
    """A baseline stored before `train.fused_attention` existed is not 'changed' by a later run at its default;
    a value other than that default is a change."""
    from workbench.analysis.claims import config_changes

    old = resolve_config("smoke", "rope", "trigger-distance", fidelity="authors")
    new = resolve_config("smoke", "rope", "trigger-distance", fidelity="authors", sets=["model.attn_pad_mask=true"])
    del old["train"]["fused_attention"]  # a config.json written before the field existed
    assert config_changes(old, new) == {"model.attn_pad_mask": (False, True)}
    new["train"]["fused_attention"] = True
    assert config_changes(old, new)["train.fused_attention"] == (False, True)


def test_one_setting_pairs_each_tier4_run_with_its_authors_baseline():
    """A tier-4 run is compared with the Table 1 variant of its setting, task and seed, the change read from the
    configs; over two seeds the difference gets a Student-t interval."""
    from workbench.analysis.claims import one_setting
    from workbench.train.presets import flatten_sets

    rows, runs = [], []
    for seed, (base_acc, acc) in ((42, (0.60, 0.90)), (43, (0.50, 0.70))):
        for tag, sets, a in (("rope", [], base_acc), ("nope", [], 0.1),
                             ("rope-with-pad-mask", [("model.attn_pad_mask", True)], acc),
                             ("rope-no-sinusoid", flatten_sets({"model.scheme": "rope", "model.scheme_kwargs": {}}),
                              acc)):
            cfg = resolve_config("smoke", "rope" if tag != "nope" else "nope", "trigger-distance", seed=seed,
                                 fidelity="authors", tag=tag, sets=sets)
            rid = f"{tag}-{seed}"
            run = FakeRun(rid, {"deposit": _deposit([3] if tag == "rope" else [1])} if seed == 42 else {})
            run.config = cfg
            runs.append(run)
            rows.append({"run_id": rid, "setting": "authors", "variant": tag, "scheme": cfg["model"]["scheme"],
                         "task": "trigger-distance", "seed": seed, "test_acc": a, "test_acc_auc": a})
    d = one_setting(FakeStore(runs), _runs_frame(rows)).set_index("variant")
    assert set(d.index) == {"rope-with-pad-mask", "rope-no-sinusoid"}
    mask = d.loc["rope-with-pad-mask"]
    assert mask.base == "rope" and mask.change == "model.attn_pad_mask: false -> true" and mask.n_seeds == 2
    assert mask.delta == pytest.approx(0.25) and mask.delta_lo < 0.25 < mask.delta_hi
    assert mask.base_acc == pytest.approx(0.55) and mask.acc == pytest.approx(0.80)
    assert mask.base_deposit == "seed 42: L3.H3 0.40; seed 43: not computed yet"
    assert mask.deposit == "seed 42: L1.H3 0.40; seed 43: not computed yet"
    nosin = d.loc["rope-no-sinusoid"].change
    assert nosin == 'model.scheme: "rope+sinusoidal" -> "rope"; model.scheme_kwargs.layout: "concat" -> null'
    # the README names the changes that moved the accuracy, largest first
    from workbench.report.comparison import one_setting_lines

    lines = one_setting_lines(one_setting(FakeStore(runs), _runs_frame(rows)))
    assert sum(line.startswith("- ") for line in lines) == 2
    assert "rope -> rope-with-pad-mask (model.attn_pad_mask: false -> true): 55.00 -> 80.00 % (+25.00 points, " \
           "2 seeds; beyond the baseline's seed spread (10.00 points))" in "\n".join(lines)
    assert one_setting_lines(one_setting(FakeStore(runs), _runs_frame(rows)), min_points=30)[-1] == \
        "- 2 other changes moved it by less than 30 points"
    # the Findings page shows the same pairs, accuracies in points
    from apps.pages import findings

    view = str(findings._one_setting_view(FakeStore(runs), _runs_frame(rows)))
    assert "rope-with-pad-mask" in view and "model.attn_pad_mask: false -> true" in view and "25.0" in view
    assert "L3.H3 0.40" in view and "No one-setting-at-a-time runs" not in view


def test_shipping_again_leaves_an_unchanged_run_alone(shipped):
    """A second `ship` of the same runs rewrites nothing (no churn in a committed results folder); a new table
    in the run store ships the run again."""
    base, ids = shipped
    from workbench.cli import app

    info = base / "results" / ids[0] / "run.json"
    before = info.read_text()
    args = ["ship", *ids, "--to", str(base / "results"), "--no-analyze", "--root", str(base / "runs")]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and f"0 shipped, {len(ids)} unchanged" in res.output, res.output
    assert info.read_text() == before
    own = RunStore(base / "runs")
    own.get(ids[0]).save_table("extra", pd.DataFrame({"a": [1.0]}))
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0 and f"1 shipped, {len(ids) - 1} unchanged" in res.output, res.output
    assert "extra" in RunStore(base / "results", readonly=True).get(ids[0]).tables()


def test_then_tables_ship_a_run_twice_and_a_failed_second_step_keeps_the_first(tmp_path, monkeypatch):
    """`ship --tables A --then-tables B`: the run is shipped with A, then analysed for B and shipped again; where
    the second step fails (here qk_means raises, as a kill would cut it), the first ship stays whole and readable."""
    from workbench import analysis
    from workbench.cli import app

    data, runs = tmp_path / "data", tmp_path / "runs"
    own = RunStore(runs, data_dir=data)
    rid = train(resolve_config("smoke", "rope", "trigger-distance", sets=TINY, store=own), own, progress=False,
                threads=1).id
    args = ["ship", rid, "--root", str(runs), "--n-boot", "20", "--tables", "ablation,deposit"]
    env = {"PELAB_DATA": str(data)}

    def broken(run, **kw):
        raise RuntimeError("simulated: cut off in the second step")

    monkeypatch.setitem(analysis.ANALYSES, "qk_means", broken)
    res = CliRunner().invoke(app, [*args, "--to", str(tmp_path / "a"), "--then-tables", "qk_means,angles"], env=env)
    assert res.exit_code != 0 and "cut off" in str(res.exception)
    first = RunStore(tmp_path / "a", readonly=True).get(rid)
    assert set(first.tables()) == {"ablation", "deposit"}
    assert not any(p.name.startswith(".") for p in (tmp_path / "a").iterdir())  # no half-shipped folder left
    monkeypatch.undo()
    res = CliRunner().invoke(app, [*args, "--to", str(tmp_path / "a"), "--then-tables", "qk_means,angles"], env=env)
    assert res.exit_code == 0, res.output
    assert f"{rid}: shipped already, unchanged" in res.output and f"{rid}: shipped again, with qk_means, angles" in res.output
    again = RunStore(tmp_path / "a", readonly=True).get(rid)
    assert set(again.tables()) == {"ablation", "deposit", "qk_means", "angles"}
    assert again.load_table("ablation").equals(first.load_table("ablation"))
    res = CliRunner().invoke(app, [*args, "--to", str(tmp_path / "b"), "--then-tables", "qk_mean"], env=env)
    assert res.exit_code != 0 and "--then-tables 'qk_mean': unknown qk_mean" in res.output
    res = CliRunner().invoke(app, ["ship", rid, "--root", str(runs), "--to", str(tmp_path / "b"),
                                   "--then-tables", "qk_means"], env=env)
    assert res.exit_code != 0 and "--then-tables needs --tables" in res.output
    assert not (tmp_path / "b").exists()


def test_a_reship_cut_between_its_renames_gets_its_copy_back(shipped, tmp_path, monkeypatch):
    """Re-shipping moves the shipped copy aside (.RUN.old) and the new one in: where a kill fell between the two,
    the next ship (and `restore_aside`) puts the copy back instead of deleting it, so that ship failing too
    loses nothing."""
    import shutil

    from workbench.store import ship
    from workbench.store.ship import restore_aside, ship_run

    base, ids = shipped
    dest = tmp_path / "results"
    shutil.copytree(base / "results", dest)
    (dest / ids[0]).rename(dest / f".{ids[0]}.old")  # the state a kill between the renames leaves
    assert not RunStore(dest, readonly=True).exists(ids[0])
    assert restore_aside(dest, ids[0]) and RunStore(dest, readonly=True).get(ids[0]).tables()
    assert not restore_aside(dest, ids[0])  # nothing aside: nothing done
    (dest / ids[1]).rename(dest / f".{ids[1]}.old")
    before = RunStore(base / "results", readonly=True).get(ids[1]).tables()

    def full_disk(tables, provenance=None):
        raise OSError("simulated: no space left on device")

    monkeypatch.setattr(ship, "bundle_bytes", full_disk)
    with pytest.raises(OSError, match="no space"):
        ship_run(RunStore(base / "runs").get(ids[1]), dest)
    assert RunStore(dest, readonly=True).get(ids[1]).tables() == before
    monkeypatch.undo()
    ship_run(RunStore(base / "runs").get(ids[1]), dest)
    assert not (dest / f".{ids[1]}.old").exists() and RunStore(dest, readonly=True).get(ids[1]).tables() == before


def test_every_copy_a_cut_reship_left_aside_is_put_back_at_once(shipped, tmp_path):
    """`restore_aside(root)` (the GPU window's, after its ship process ends): every `.RUN.old` whose run folder is
    missing goes back; one beside its run folder (a re-ship that finished) is left for the next ship to remove."""
    import shutil

    from workbench.store.ship import restore_aside

    base, ids = shipped
    dest = tmp_path / "results"
    shutil.copytree(base / "results", dest)
    for rid in ids[:2]:
        (dest / rid).rename(dest / f".{rid}.old")
    shutil.copytree(dest / ids[2], dest / f".{ids[2]}.old")
    assert sorted(restore_aside(dest)) == sorted(ids[:2])
    assert all(RunStore(dest, readonly=True).exists(rid) for rid in ids) and (dest / f".{ids[2]}.old").is_dir()
    assert restore_aside(dest) == []


def test_encoder_and_decoder_runs_of_the_grid_reach_table1():
    """Tier 2's encoder/decoder points are tagged with their scheme, so Table 1 has their rows (a run tagged
    'encoder-rope' would be left out: Table 1 reads variant == scheme)."""
    from workbench.train.sweep import grid_points, load_grid

    grid = load_grid(Path(__file__).resolve().parents[1] / "grids" / "repro.toml")
    points = [p for p in grid_points(grid, [2]) if p["arch"] in ("encoder", "decoder")]
    assert len(points) == 18
    rows = [{"run_id": f"{p['arch']}-{p['tag']}-{p['seed']}", "setting": p["arch"], "variant": p["tag"],
             "scheme": p["scheme"], "task": p["task"], "seed": p["seed"], "test_acc": 0.5, "test_acc_auc": 0.5}
            for p in points]
    t1 = table1(_runs_frame(rows))
    assert sorted(zip(t1.setting, t1.scheme)) == sorted((a, s) for a in ("decoder", "encoder")
                                                        for s in ("mla", "nope", "rope"))
    assert set(t1.n_seeds) == {3}


def test_partial_rope_pairs_put_full_rope_of_the_same_task_and_seeds_beside_each_variant():
    from workbench.analysis.claims import partial_rope_pairs

    class ConfiguredRun(FakeRun):
        def __init__(self, rid, tables, kwargs):
            super().__init__(rid, tables)
            self.config = {"model": {"scheme": "rope", "scheme_kwargs": kwargs}}

    def dep(layer):
        return pd.DataFrame([{"layer": l, "metric": "accuracy", "single_head_deposit": l == layer,
                              "average_deposit": False, "top_head": 2, "top_delta": 0.5 if l == layer else 0.01,
                              "top_lo": 0.4, "top_hi": 0.6} for l in range(3)])

    rows, runs = [], []
    for seed in (42, 43):
        rows.append({"run_id": f"rope-{seed}", "variant": "rope", "scheme": "rope", "task": "trigger-distance",
                     "seed": seed, "test_acc": 1.0, "test_acc_auc": 0.9})
        runs.append(ConfiguredRun(f"rope-{seed}", {"deposit": dep(1)}, {}))
    rows.append({"run_id": "k1-42", "variant": "rope-k1-l0", "scheme": "rope", "partial": True, "seed": 42,
                 "task": "trigger-distance", "test_acc": 0.8, "test_acc_auc": 0.7})
    runs.append(ConfiguredRun("k1-42", {"deposit": dep(2)}, {"rope_heads": 1, "rope_layers": [0]}))
    rows.append({"run_id": "k4-42", "variant": "rope-k4-all", "scheme": "rope", "partial": True, "seed": 42,
                 "task": "trigger-count", "test_acc": 0.9, "test_acc_auc": 0.7})
    runs.append(ConfiguredRun("k4-42", {}, {"rope_heads": 4}))
    d = partial_rope_pairs(FakeStore(runs), _runs_frame(rows)).set_index("variant")
    k1 = d.loc["rope-k1-l0"]
    assert (k1.rope_heads, k1.rope_layers, k1.n_seeds, k1.acc, k1.full_acc) == (1, "0", 1, 0.8, 1.0)
    assert k1.deposit == "seed 42: L2.H2 0.50" and k1.full_deposit == "seed 42: L1.H2 0.50"  # seed 43 not paired
    assert k1.deposits_on_rope_heads == "seed 42: 0 of 1"  # RoPE on head 0 of layer 0; the deposit is L2.H2
    assert k1.runs == ["k1-42", "rope-42"]
    k4 = d.loc["rope-k4-all"]
    assert k4.rope_layers == "every" and k4.deposit == "seed 42: not computed yet" and k4.full_deposit == "no run"
    assert k4.deposits_on_rope_heads == "not computed yet"
    runs[-1]._tables["deposit"] = dep(2)  # head 2 < k = 4, every layer has RoPE: on a RoPE head
    again = partial_rope_pairs(FakeStore(runs), _runs_frame(rows)).set_index("variant")
    assert again.loc["rope-k4-all"].deposits_on_rope_heads == "seed 42: 1 of 1"
    from workbench.report.comparison import partial_rope_lines

    lines = partial_rope_lines(partial_rope_pairs(FakeStore(runs), _runs_frame(rows)))
    assert "- rope-k1-l0 (Task 1, k = 1, RoPE layers 0): 80.00 % vs 100.00 %; deposits on a RoPE head seed 42: 0 of 1" \
        in lines
    assert partial_rope_lines(partial_rope_pairs(FakeStore(runs), _runs_frame(rows[:2]))) == []
    assert np.isnan(k4.full_acc)
    assert k1.uncounted == "" and not any("not counted" in line for line in lines)  # both learned and settled
    rows[2] |= {"still_learning": True}  # k1-42 still learning: its deposits are said not to count
    lines = partial_rope_lines(partial_rope_pairs(FakeStore(runs), _runs_frame(rows)))
    assert [line for line in lines if "rope-k1-l0" in line][0].endswith(
        "seed 42: 0 of 1 (not counted: seed 42 still learning)")


def test_the_study_line_says_how_its_preset_differs_from_the_box_above_it():
    from workbench.report.study import preset_difference

    assert preset_difference() == "`repro` with train.epochs 12 (not 3)"
    assert preset_difference("repro") == "the same as `repro`"


def test_scheme_overview_has_one_row_per_scheme_and_task_with_the_seed_interval():
    from workbench.analysis.claims import scheme_overview

    rows, runs = [], []
    for seed, acc in ((42, 0.9), (43, 1.0), (44, 0.95)):
        rows.append({"run_id": f"t5-{seed}", "variant": "t5", "scheme": "t5", "task": "trigger-distance", "seed": seed,
                     "test_acc": acc, "test_acc_auc": acc})
        runs.append(FakeRun(f"t5-{seed}", {"deposit": _deposit([0])} if seed == 42 else {}))
    rows.append({"run_id": "k1", "variant": "rope-k1-all", "scheme": "rope", "partial": True, "seed": 42,
                 "task": "trigger-distance", "test_acc": 0.9, "test_acc_auc": 0.9})
    rows.append({"run_id": "a-rope", "variant": "rope", "scheme": "rope", "setting": "authors", "seed": 42,
                 "task": "trigger-distance", "test_acc": 0.9, "test_acc_auc": 0.9})
    d = scheme_overview(FakeStore(runs), _runs_frame(rows))
    assert list(d.scheme) == ["t5"]  # partial and other settings' runs are not schemes of the paper arch
    r = d.iloc[0]
    assert r.n_seeds == 3 and r["mean"] == pytest.approx(0.95) and r.hi == 1.0 and r.lo == 0.9
    assert r.deposit == "seed 42: L0.H3 0.40; seed 43: not computed yet; seed 44: not computed yet"


def _study_store():
    """Made-up seed-study runs: RoPE with its largest deposit in layer 0 in 15 of 20 runs (else layer 1), MLA with
    a largest drop of 0.03 in 12 of 20 runs and 0.07 in the others; beside them the pre-registration seeds 42-44
    (data seed 42), RoPE in layer 1 and MLA at 0.20, which must not be pooled into the study's shares."""
    def atlas(top):
        return pd.DataFrame([{"layer": l, "head": h, "metric": "accuracy", "delta": top if (l, h) == (2, 3) else 0.001,
                              "ci_lo": 0.0, "ci_hi": 0.1} for l in range(6) for h in range(4)])

    rows, runs, i = [], [], 0
    for seed, data in [(s, d) for d in (43, 44) for s in range(45, 55)] + [(s, 42) for s in (42, 43, 44)]:
        pre = data == 42
        rid = f"t1-rope-repro-long-s{seed}-d{data}"
        layer = 1 if pre or i % 4 == 3 else 0
        rows.append({"run_id": rid, "variant": "rope", "scheme": "rope", "task": "trigger-distance", "seed": seed,
                     "data_seed": data, "preset": "repro-long", "test_acc": 0.99, "test_acc_auc": 0.9})
        runs.append(FakeRun(rid, {"deposit": _deposit([layer], n_layers=6)}))
        rid = f"t1-mla-repro-long-s{seed}-d{data}"
        rows.append({"run_id": rid, "variant": "mla", "scheme": "mla", "task": "trigger-distance", "seed": seed,
                     "data_seed": data, "preset": "repro-long", "test_acc": 0.95, "test_acc_auc": 0.9,
                     **({"settled": False, "still_learning": True} if seed == 54 else {})})
        runs.append(FakeRun(rid, {"ablation": atlas(0.20 if pre else 0.03 if i % 5 < 3 else 0.07)}))
        i += 1
    return FakeStore(runs), _runs_frame(rows)


def test_the_study_reads_mlas_share_against_ropes_runs_by_the_same_rule():
    """`[decision.share]` version 2 in the study: MLA's "no indispensable head" read on the RoPE runs of its group
    too (the registered contrast); where RoPE passes it at a threshold, MLA's reproduced reads inconclusive (not
    specific) there; where RoPE has a head it cannot lose, the decision stands."""
    from workbench.analysis.claims import study_readouts, study_table

    def with_rope_drops(top):
        store, frame = _study_store()
        for run in store._runs.values():
            if "-rope-" in run.id:
                run._tables["ablation"] = pd.DataFrame([
                    {"layer": l, "head": h, "metric": "accuracy", "delta": top if (l, h) == (0, 1) else 0.001,
                     "ci_lo": 0.0, "ci_hi": 0.1} for l in range(6) for h in range(4)])
        reads = study_readouts(study_table(store, frame)).set_index(["group", "scheme", "readout"])
        return reads.loc[("study", "mla", "largest drop of any head < threshold")]

    flat = with_rope_drops(0.03)  # RoPE has no indispensable head either: the rule cannot tell MLA from it
    assert flat.decision_010 == "inconclusive (not specific)" and flat.decision == "mixed"
    assert "contrast RoPE: 20 of 20 counted runs agree" in flat.at_010 and "(not specific)" in flat.at_010
    deep = with_rope_drops(0.40)  # RoPE's deposit head: the contrast fails the rule, MLA's share stands
    assert deep.decision_010 == "reproduced" and "contrast RoPE: 0 of 20 counted runs agree" in deep.at_010


def test_the_seed_study_reads_its_registered_runs_and_never_pools_the_earlier_ones():
    from workbench.analysis.claims import study_readouts, study_table, tier2_readouts
    from workbench.figures.study import study_map
    from workbench.report.study import study_section, study_lines

    store, frame = _study_store()
    st = study_table(store, frame)
    assert len(st) == 46 and set(st.group) == {"study", "ladder seeds"}
    assert list(st.columns[:6]) == ["group", "scheme", "train_seed", "data_seed", "status", "counted"]
    rope = st[(st.scheme == "rope") & (st.group == "study")]
    assert len(rope) == 20 and (rope.layer_005 == 0).sum() == 15 and rope.counted.all()
    assert st[(st.scheme == "mla") & (st.train_seed == 54)].counted.sum() == 0  # not settled: not counted
    reads = study_readouts(st).set_index(["group", "scheme", "readout"])
    layer0 = reads.loc[("study", "rope", "largest deposit in layer 0")]
    assert layer0.at_005.startswith("15 of 20 counted runs agree, Wilson 95 % [0.53, 0.89]")
    # 15 of 20 would read reproduced, but RoPE's registered contrast, ALiBi, has no study run: the rule is not shown
    # to fail on it (`[decision.share]` version 3)
    assert layer0.decision == "inconclusive (specificity not shown)"
    assert "contrast ALiBi: no counted run" in layer0.at_005
    assert layer0.rests_on == "10 training seeds x 2 data seeds (43, 44)"
    second = reads.loc[("study", "rope", "largest deposit in layer <= 1 (second reading)")]
    assert second.at_005.startswith("20 of 20") and second.decision == second.decision_010 == "shown, never deciding"
    pre = reads.loc[("ladder seeds", "rope", "largest deposit in layer 0")]
    assert pre.at_005.startswith("0 of 3") and pre.decision == "inconclusive (too few seeds)"  # beside, not pooled
    mla = reads.loc[("study", "mla", "largest drop of any head < threshold")]
    assert mla.at_005.startswith("12 of 18") and mla.at_010.startswith("18 of 18")  # 0.07: below 0.10 only
    # 18 of 18 at 0.10, but no RoPE run of the study has an ablation table here: specificity not shown (version 3)
    assert mla.decision == "mixed" and mla.decision_010 == "inconclusive (specificity not shown)"
    assert reads.loc[("study", "mla", "largest drop of any head: min / median / max")].at_005 == "0.030 / 0.030 / 0.070"
    text = study_section(st, frame, tier2_readouts(frame))
    assert "Study runs shipped: 40 of 40." in text and "| ladder seeds | RoPE | 3 | 3 |" in text
    fig = study_map(st)
    assert len(fig.data) >= 2 and {t.name for t in fig.data} >= {"RoPE", "MLA"}
    titles = [a.text for a in fig.layout.annotations]  # each panel names its deciding readout, as the table does
    assert "RoPE (a run agrees: largest deposit in layer 0)" in titles
    assert "MLA (a run agrees: largest drop of any head < 0.05)" in titles
    assert "MLA (a run agrees: largest drop of any head < 0.10)" in [a.text for a in study_map(st, threshold="010")
                                                                   .layout.annotations]
    half = study_table(store, frame[frame.data_seed != 44])  # data seed 44 not shipped yet: an interim look
    early = study_readouts(half).set_index(["group", "scheme", "readout"])
    assert early.loc[("study", "rope", "largest deposit in layer 0")].decision == "mixed (interim: 10 of 20 runs)"
    assert early.loc[("study", "mla", "largest drop of any head < threshold")].decision.endswith(
        "(few runs; interim: 10 of 20 runs)")  # seed 54 not settled: 9 counted
    assert early.loc[("ladder seeds", "rope", "largest deposit in layer 0")].decision == \
        "inconclusive (too few seeds)"
    readme = "\n".join(study_lines(half, tier2_readouts(frame), "docs/img/findings_study.png"))
    assert "20 of 40 shipped so far" in readme
    assert ("- RoPE, largest deposit in layer 0, at 0.05: 8 of 10 counted runs agree, Wilson 95 % [0.49, 0.94]; "
            "contrast ALiBi: no counted run: **mixed (interim: 10 of 20 runs)**") in readme
    assert ("layer <= 1 (second reading), at 0.05: 10 of 10 counted runs agree, Wilson 95 % [0.72, 1.00]; contrast "
            "ALiBi: no counted run\n") in readme
    assert "(docs/img/findings_study.png)\n\nTier 2 (NoPE vs RoPE" in readme
    assert readme.endswith("- no pair has finished yet")  # no tier-2 run in this store
    full = "\n".join(study_lines(st, tier2_readouts(frame)))
    assert "40 of 40 shipped. The study's models are PE-Lab's `paper` arch with dropout 0 (the paper's 0.1" in full
    assert full.index("RoPE is RoPE alone") < full.index("Readouts under the registered rules")  # said first
    empty = study_table(store, frame[frame.data_seed == 42])
    assert "Study runs shipped: 0 of 40 (none has finished yet" in study_section(empty, frame, tier2_readouts(frame))
    assert "- no study run has finished yet" in study_lines(empty, tier2_readouts(frame))


def _tier2_frame(nope_minus_rope, still_learning=()):
    """Tier 2's runs by hand: NoPE and RoPE on Task 2 at repro-paperdata-long, training seeds 45-51 x data seeds
    43-44 (the study) and seeds 42-44 of data seed 42 (before the registration, still learning); RoPE at 0.70 and
    NoPE at 0.70 + `nope_minus_rope(i)` on the i-th study pair; `still_learning`: study pairs whose NoPE run is."""
    rows, i = [], 0
    for seed, data in [(s, d) for d in (43, 44) for s in range(45, 52)] + [(s, 42) for s in (42, 43, 44)]:
        pre = data == 42
        for scheme, acc in (("rope", 0.70), ("nope", 0.70 + (0.0 if pre else nope_minus_rope(i)))):
            still = pre or (scheme == "nope" and i in still_learning)
            rows.append({"run_id": f"t2-{scheme}-repro-paperdata-long-s{seed}-d{data}", "variant": scheme,
                         "scheme": scheme, "task": "trigger-count", "seed": seed, "data_seed": data,
                         "preset": "repro-paperdata-long", "test_acc": acc, "test_acc_auc": 0.5,
                         "still_learning": still, "chance": 1 / 101, "reference": 0.05})
        i += 0 if pre else 1
    return _runs_frame(rows)


def test_tier2_judges_nope_vs_rope_by_the_ordering_rule_on_its_own_pairs():
    """Tier 2 pairs NoPE and RoPE by training x data seed and reads the registered ordering: NoPE ahead on every
    pair by 3-5 points is reproduced; the contrast (RoPE ahead by as much) is not reproduced; a difference that
    flips sign within the seeds' spread is neither; one NoPE run still learning makes the whole readout cannot
    tell; a missing data seed is interim; the runs trained before the registration are read apart, never pooled."""
    from workbench.analysis.claims import tier2_pairs, tier2_readouts
    from workbench.report.study import tier2_section, study_lines

    ahead = _tier2_frame(lambda i: 0.03 + 0.02 * (i % 2))
    pairs = tier2_pairs(ahead)
    assert len(pairs) == 17 and (pairs.group == "study").sum() == 14
    reads = tier2_readouts(ahead).set_index("group")
    assert reads.loc["study", "pairs"] == 14 and reads.loc["study", "decision"] == "reproduced"
    assert reads.loc["study", "rests_on"] == "7 training seeds x 2 data seeds (43, 44)"
    assert reads.loc["study", "evidence"].startswith("paired difference +0.040, t 95 % [+0.034, +0.046] over 14")
    assert reads.loc["ladder seeds", "decision"] == "inconclusive (still learning)"  # beside, never pooled
    assert tier2_readouts(_tier2_frame(lambda i: -0.03 - 0.02 * (i % 2))).set_index("group").loc[
        "study", "decision"] == "not reproduced"
    assert tier2_readouts(_tier2_frame(lambda i: 0.05 * (-1) ** i)).set_index("group").loc[
        "study", "decision"] == "inconclusive (within seed spread)"
    assert tier2_readouts(_tier2_frame(lambda i: 0.04, still_learning={3})).set_index("group").loc[
        "study", "decision"] == "inconclusive (still learning)"
    half = ahead[ahead.data_seed != 44]
    assert tier2_readouts(half).set_index("group").loc["study", "decision"] == "reproduced (interim: 7 of 14 pairs)"
    text = tier2_section(ahead, tier2_readouts(ahead))
    assert "Study pairs shipped: 14 of 14" in text and "| study | 45 | 43 | 73.00 (learned) | 70.00 (learned) | +3.00 points |" in text
    lines = study_lines(pd.DataFrame(columns=["group"]), tier2_readouts(ahead))
    assert "- study: 14 pairs, paired difference +0.040" in "\n".join(lines) and lines[-1].endswith(
        "**inconclusive (still learning)**")


def test_the_seed_study_does_not_read_a_run_without_its_table_as_a_disagreement():
    from workbench.analysis.claims import study_readouts, study_table

    store, frame = _study_store()
    for rid in [r for r in store._runs if r.startswith("t1-rope") and "-d43" in r]:
        store._runs[rid]._tables = {}  # shipped without its deposit table
    st = study_table(store, frame)
    assert not st[(st.scheme == "rope") & (st.data_seed == 43)].has_deposit.any()
    reads = study_readouts(st).set_index(["group", "scheme", "readout"])
    row = reads.loc[("study", "rope", "largest deposit in layer 0")]
    assert row.counted == 10 and row.at_005.startswith("7 of 10")  # the ten runs of data seed 44 only


def test_provenance_names_the_vendor_and_simd_level_a_bit_identical_re_training_needs():
    """COMPARISON.md's provenance groups the runs by what a bit-identical re-training needs: CPU vendor and the
    SIMD level ATen dispatched to (run.json `numerics`, or `machine` before it); the CPU model where neither is
    recorded, so a reader knows which machine can re-check which runs."""
    from workbench.report.comparison import _vendor_level

    runs = pd.DataFrame({"cpu_vendor": ["AuthenticAMD", "GenuineIntel", None, "AuthenticAMD"],
                         "simd": ["AVX2", "AVX512", None, None], "cpu": ["AMD EPYC", "Intel Xeon", "AMD EPYC", "x"]})
    assert list(_vendor_level(runs)) == ["AuthenticAMD at AVX2", "GenuineIntel at AVX512",
                                         "AMD EPYC, level not recorded", "AuthenticAMD, level not recorded"]
    shipped = (Path(__file__).resolve().parents[1] / "results" / "repro" / "COMPARISON.md").read_text()
    assert "By vendor and level: " in shipped and " at AVX2 (" in shipped  # the rest: test_the_shipped_comparison_...


def test_provenance_names_every_run_resumed_under_other_settings_with_what_changed():
    """A run resumed from a checkpoint under another code version (a session ended mid-run) keeps its first
    session's run.json fields and records the change in `resumed_settings` (and, since 8e069bf, each kept session in
    `sessions`): COMPARISON.md's provenance names each such shipped run with what changed (each session's value with
    the epochs it trained, where `sessions` is recorded; else first -> last), and no other run."""
    from workbench.analysis.claims import run_table
    from workbench.report.comparison import _provenance_section
    from workbench.store import RunStore

    root = Path(__file__).resolve().parents[1] / "results" / "repro"
    recorded = {p.parent.name: json.loads(p.read_text()).get("resumed_settings") for p in root.glob("*/run.json")}
    recorded = {k: v for k, v in recorded.items() if v}
    assert recorded, "the shipped study has runs resumed across code versions"
    line = next(x for x in _provenance_section(run_table(RunStore(root, readonly=True))).splitlines()
                if x.startswith("- resumed from a checkpoint"))
    assert f": {len(recorded)} of " in line
    named = set(re.findall(r"`([a-z0-9-]+-[0-9a-f]{6})`", line))
    assert named == set(recorded)
    for rid, changed in recorded.items():
        info = json.loads((root / rid / "run.json").read_text())
        sessions = info.get("sessions") or []
        if len(sessions) < 2:
            assert f"`{rid}` (" + "; ".join(f"`{k}` {a} -> {b}" for k, (a, b) in changed.items()) + ")" in line
            continue
        said = line.split(f"`{rid}` (", 1)[1]
        last = [s["from_epoch"] for s in sessions[1:]] + [info["epochs"]]  # session i trains from_epoch + 1 .. next's
        for k in changed:
            assert f"`{k}` " + " -> ".join(f"{s[k]} ({'epochs ' * (i == 0)}{s['from_epoch'] + 1}-{end})"
                                           for i, (s, end) in enumerate(zip(sessions, last))) in said


def test_a_recomputed_table_is_compared_on_the_shipped_columns_and_names_the_added_ones():
    """Today's analysis may add columns to a table shipped earlier (dla's runner-up margin, patching's note): those
    are named and not compared; a shipped column the recomputed table lacks makes it differ."""
    from workbench.analysis.reproduce import table_agreement

    shipped = pd.DataFrame({"layer": [0, 1], "dla": np.float32([0.5, 0.25])})
    mine = shipped.astype({"dla": "float64"}).assign(dla_vs_runner_up=[0.1, 0.2], note=["", "x"])
    a = table_agreement(shipped, mine)
    assert a["equal"] and a["added"] == ["dla_vs_runner_up", "note"]
    assert a["why"].endswith("(columns added since it was shipped, not compared: dla_vs_runner_up, note)")
    a = table_agreement(shipped.assign(old=[1, 2]), mine)
    assert not a["equal"] and "the shipped columns old are not recomputed" in a["why"]
    assert not table_agreement(shipped, mine.assign(dla=[0.5, 0.3]))["equal"]  # a shared column is still compared
    # a vote left out reads None from a shipped parquet and NaN when recomputed: the same missing value
    votes = pd.DataFrame({"layer": [0, 1], "by_patching": pd.Series([True, None], dtype=object)})
    assert table_agreement(votes, votes.assign(by_patching=pd.Series([True, np.nan], dtype=object)))["equal"]
    assert not table_agreement(votes, votes.assign(by_patching=pd.Series([False, np.nan], dtype=object)))["equal"]
    assert table_agreement(pd.DataFrame({"x": [0.5]}), pd.DataFrame({"x": [0.5]}))["equal"]  # floats only


class _Shipped:
    """A shipped run as `reproduce` reads it: its info, tables and what made each (`provenance`)."""

    def __init__(self, shipped: str, tables: dict, provenance: dict | None = None, config: dict | None = None,
                 code: str | None = None):
        self.info, self._tables, self._made = {"shipped": shipped, "code_version": code}, tables, provenance or {}
        self.config = config or {}

    def tables(self):
        return list(self._tables)

    def load_table(self, name):
        return self._tables[name]

    def provenance_of(self, name):
        return self._made.get(name)


def test_a_table_made_before_its_analysis_changed_is_known_by_the_ship_date():
    """`made_before`: a probes table shipped before the probes' solver changed (6a3fc22) came from the old solver,
    and so did a head summary that joins it; one shipped after, or a table whose analysis did not change, did
    not."""
    from workbench.analysis.reproduce import CHANGES, made_before, said_changes

    landed = CHANGES["probes"][0].landed
    t = {"probes": pd.DataFrame(), "head_summary": pd.DataFrame(), "dla": pd.DataFrame()}
    old, new = _Shipped("2026-11-22T06:48:34+00:00", t), _Shipped("2026-11-26T17:56:00+00:00", t)
    assert old.info["shipped"] < landed < new.info["shipped"]
    probes_change = [("probes", CHANGES["probes"][0])]
    assert made_before("probes", old) == probes_change and made_before("head_summary", old) == probes_change
    assert made_before("dla", old) == [] and made_before("probes", new) == []
    assert made_before("head_summary", _Shipped(old.info["shipped"], {"head_summary": pd.DataFrame()})) == []
    # a table records when it was made: that, not the ship date, decides (analysed before, shipped after)
    late = _Shipped(new.info["shipped"], t, {"probes": {"analysed": "2026-11-24T00:00:00+00:00"}})
    assert made_before("probes", late) == probes_change and made_before("head_summary", late) == probes_change
    fresh = _Shipped(old.info["shipped"], t, {"probes": {"analysed": "2026-11-26T00:00:00+00:00"}})
    assert made_before("probes", fresh) == []
    # its probes refreshed since (`verify --refresh --tables probes`), the summary still joined the old ones
    assert made_before("head_summary", fresh) == probes_change
    both_new = _Shipped(old.info["shipped"], t, {n: {"analysed": "2026-11-26T00:00:00+00:00"}
                                                 for n in ("probes", "head_summary")})
    assert made_before("head_summary", both_new) == []
    # a summary joining two tables made before their changes names both, oldest first, by commit and table
    both = _Shipped(old.info["shipped"], dict(t, patching=pd.DataFrame()))
    assert made_before("head_summary", both) == [("patching", CHANGES["patching"][0])] + probes_change
    assert said_changes("head_summary", made_before("head_summary", both)) == \
        "changes of tables it joins: eccf8f7 (patching, 2026-11-25), 6a3fc22 (probes, 2026-11-25)"
    assert said_changes("probes", probes_change) == f"6a3fc22 (2026-11-25) changed it: {CHANGES['probes'][0].what}"


def test_a_table_made_by_code_without_a_change_is_stale_whatever_its_date(monkeypatch):
    """`made_before` reads the code that made a table (its provenance's code version, else the run's) by git
    ancestry: a table shipped after a change landed but from a branch without it is stale, one whose code holds the
    change is not whatever the dates say, and where git cannot tell the dates decide."""
    from workbench.analysis.reproduce import CHANGES, made_before
    from workbench.store import runstore

    c = CHANGES["probes"][0]
    history = {("side", c.commit): False, ("main", c.commit): True, ("made", c.commit): True}
    monkeypatch.setattr(runstore, "contains_commit", lambda code, commit: history.get((code, commit)))
    t = {"probes": pd.DataFrame(), "head_summary": pd.DataFrame()}
    after, before = "2026-11-25T03:49:54+00:00", "2026-11-22T06:48:34+00:00"
    assert before < c.landed < after
    side = _Shipped(after, t, code="side")
    assert made_before("probes", side) == [("probes", c)] and made_before("head_summary", side) == [("probes", c)]
    assert made_before("probes", _Shipped(before, t, code="main")) == []  # the code holds it: the clock is moot
    assert made_before("probes", _Shipped(before, t, code="elsewhere")) == [("probes", c)]  # git cannot tell
    assert made_before("probes", _Shipped(after, t, code="elsewhere")) == []
    # a table's own provenance names its code before the run's does (re-made since, e.g. `verify --refresh`)
    remade = _Shipped(after, t, {"probes": {"code_version": "made", "analysed": before}}, code="side")
    assert made_before("probes", remade) == [] and made_before("head_summary", remade) == [("probes", c)]


def test_the_solver_change_is_not_in_the_branch_that_shipped_the_tapa_runs():
    """The history behind the rule: b523926 (which trained and shipped t1-tapa-repro-s42-ea0e93 after 6a3fc22
    landed) lacks the probes' solver change; the code that holds this test has it."""
    from workbench.analysis.reproduce import SOLVER_CHANGE, made_before
    from workbench.store.runstore import code_version, contains_commit

    if contains_commit("b523926", SOLVER_CHANGE.commit) is None:
        pytest.skip("this copy has no git history holding b523926 (a shallow clone or an export)")
    assert contains_commit("b523926", SOLVER_CHANGE.commit) is False
    assert contains_commit(code_version(), SOLVER_CHANGE.commit) is True
    tapa = _Shipped("2026-11-25T03:49:54+00:00", {"probes": pd.DataFrame()}, code="b523926")
    assert tapa.info["shipped"] > SOLVER_CHANGE.landed and made_before("probes", tapa) == [("probes", SOLVER_CHANGE)]


def test_a_change_of_the_authors_settings_makes_only_their_tables_stale():
    """`Change.applies`: the fixes of 9c4aa73 moved the numbers of runs in the authors' settings only (pads attended,
    trigger words in the filler, vocab-sized outputs); a default run's tables of the same date are not stale."""
    from workbench.analysis.reproduce import CHANGES, made_before, stale_tables
    from workbench.train.presets import resolve_config

    tables = {n: pd.DataFrame() for n in ("patching", "probes", "trigger_attention", "dla", "head_summary")}
    when = "2026-12-01T00:00:00+00:00"  # after the solver's and patching's first changes, before 9c4aa73
    default = resolve_config("cpu", "rope", "trigger-distance")
    authors = resolve_config("cpu", "rope", "trigger-distance", fidelity="authors")
    assert stale_tables(_Shipped(when, tables, config=default)) == []
    old = _Shipped(when, tables, config=authors)
    assert sorted(stale_tables(old)) == ["dla", "head_summary", "patching", "probes", "trigger_attention"]
    assert [c.commit for _, c in made_before("trigger_attention", old)] == ["9c4aa73", "9c4aa73"]
    assert made_before("probes", old) == [("probes", CHANGES["probes"][1])]  # not the solver's: made after it
    assert stale_tables(_Shipped("2026-12-06T00:00:00+00:00", tables, config=authors)) == []
    # a claim's evidence names the seeds whose head summary joins such a table
    from types import SimpleNamespace

    from workbench.analysis.claims.rules import _made_before

    runs = {"a": old, "b": _Shipped("2026-12-06T00:00:00+00:00", tables, config=authors)}
    sub = pd.DataFrame({"run_id": ["a", "b"], "seed": [42, 43]})
    note = _made_before(SimpleNamespace(get=runs.get), sub, runs, "head_summary")
    assert note.startswith("; seed 42: head_summary made before 9c4aa73 changed") and "43" not in note
    assert _made_before(SimpleNamespace(get=runs.get), sub.iloc[1:], runs, "head_summary") == ""


def test_the_recomputation_reads_its_parameters_from_the_shipped_tables():
    """The bootstrap and test sample from the ablation table; a head summary's thresholds read back as the decimals
    they were written from (float32 0.05 -> 0.05), and its dla margin: the recorded one, else the mean margin every
    summary voted on before `dla_measure` was recorded (f041229)."""
    from workbench.analysis.reproduce import DLA_MEASURE_BEFORE, SHIP_PARAMS, shipped_params

    abl = pd.DataFrame({"n_boot": [200], "n_examples": [300]})
    hs = pd.DataFrame({"min_delta": np.float32([0.05]), "min_effect": np.float32([0.1]), "min_agree": [3]})
    params, per = shipped_params(_Shipped("2026-11-22", {"ablation": abl, "head_summary": hs}))
    assert params == dict(SHIP_PARAMS, n_boot=200, max_examples=300)
    assert per == {"head_summary": {"min_delta": 0.05, "min_effect": 0.1, "min_agree": 3,
                                    "dla_measure": DLA_MEASURE_BEFORE}}
    _, per = shipped_params(_Shipped("2026-11-30", {"head_summary": hs.assign(dla_measure="runner_up")}))
    assert per["head_summary"]["dla_measure"] == "runner_up"
    assert shipped_params(_Shipped("2026-11-30", {})) == (SHIP_PARAMS, {})


def test_verify_compares_but_does_not_judge_a_table_made_before_its_analysis_changed(shipped, tmp_path):
    """A shipped probes table that today's solver does not give (a score moved by 0.05): shipped by code that holds
    the solver's change (6a3fc22), the run is NOT verified; shipped before it by code without it, the table came
    from the old solver, so it is compared and said, not judged, and the run verifies (its other tables agree)."""
    import shutil

    from workbench.analysis.reproduce import CHANGES
    from workbench.cli import app
    from workbench.store.bundle import BUNDLE, bundle_bytes

    base, ids = shipped
    fake, rid = tmp_path / "results", ids[2]
    shutil.copytree(base / "results" / rid, fake / rid)
    run = RunStore(fake, readonly=True).get(rid)
    tables = {n: run.load_table(n) for n in run.tables()}
    tables["probes"].loc[tables["probes"].index[0], "score"] += 0.05
    (fake / rid / BUNDLE).write_bytes(bundle_bytes(tables))
    env, mine = {"PELAB_DATA": str(base / "data")}, tmp_path / "mine"
    args = ["verify", rid, "--shipped", str(fake), "--root", str(mine), "-q", "--tables", "probes,head_summary,dla"]
    info = json.loads((fake / rid / "run.json").read_text())
    for shipped_at, by, code in (("2026-11-20T00:00:00+00:00", "b523926", 0),
                                 (info["shipped"], info["code_version"], 1)):
        (fake / rid / "run.json").write_text(json.dumps(info | {"shipped": shipped_at, "code_version": by}))
        write_manifest(fake / rid)
        res = CliRunner().invoke(app, args, env=env)
        assert res.exit_code == code, res.output
        probes = next(ln for ln in res.output.splitlines() if ln.startswith("probes: "))
        assert "largest |difference| 0.05 in score" in probes
        assert [ln.startswith(f"{n}: ") and ln.endswith("; agrees") for n in ("head_summary", "dla")
                for ln in res.output.splitlines() if ln.startswith(f"{n}: ")] == [True, True]
        if code == 0:
            change = CHANGES["probes"][0]
            assert probes.endswith(f"; not judged: made before {change.commit} (2026-11-25) changed it: "
                                   f"{change.what}")
            assert ("its head_summary and dla tables recomputed from its weights agree with the shipped ones (probes "
                    "made by an earlier analysis: compared, not judged)") in res.output
        else:
            assert probes.endswith("; DIFFERS") and "but the shipped probes table is not what" in res.output


def test_the_recomputation_runs_on_the_thread_count_the_tables_were_made_on(shipped):
    """The probes' L-BFGS sums in float32 in an order that follows torch's thread count; each table records what
    made it (its provenance, carried into the shipped bundle), so `verify` recomputes on the probes' count; a table
    shipped before tables recorded it: the run's training threads."""
    import torch

    from workbench.analysis.reproduce import analysis_threads

    base, ids = shipped
    run = RunStore(base / "results", readonly=True).get(ids[0])
    made = run.provenance_of("probes")
    assert made["numerics"]["threads"] == torch.get_num_threads()  # the ship analysed it in this process
    assert analysis_threads(run) == made["numerics"]["threads"]
    assert analysis_threads(_Shipped("2026-11-30", {"probes": None}, {"probes": {"numerics": {"threads": 3}}})) == 3
    old = _Shipped("2026-11-22", {"probes": None})
    assert analysis_threads(old) is None
    old.info["threads"] = 1
    assert analysis_threads(old) == 1


def test_comparison_says_which_runs_probes_came_from_the_former_solver(shipped, tmp_path):
    """The decodable-layer table reads every run's probes; where some were shipped before the probes' solver
    changed, COMPARISON.md says how many, and what changed; where none were, it says nothing of it."""
    import shutil

    from workbench.analysis.reproduce import CHANGES
    from workbench.report.comparison import comparison_markdown

    base, ids = shipped
    results = tmp_path / "results"
    shutil.copytree(base / "results", results)

    def section():
        text = comparison_markdown(RunStore(results, readonly=True))
        return text.split("## Where the label first becomes linearly decodable")[1].split("\n## ")[0]

    assert "former solver" not in section()
    from workbench.store.bundle import BUNDLE, bundle_bytes

    run = RunStore(results, readonly=True).get(ids[0])  # its probes made before the solver changed, as recorded
    made = {n: run.provenance_of(n) for n in run.tables()}
    made["probes"] = dict(made["probes"], analysed="2026-11-20T00:00:00+00:00", code_version="b523926")
    (results / ids[0] / BUNDLE).write_bytes(bundle_bytes({n: run.load_table(n) for n in run.tables()}, made))
    write_manifest(results / ids[0])
    assert (f"1 of these 3 runs was analysed by code without {CHANGES['probes'][0].commit} (2026-11-25; shipped "
            "before it, or from a branch without it), so their probes come from the former solver") in section()


def _stale_copy(base, rid, dest, shipped_at="2026-11-20T00:00:00+00:00", probe_shift=0.05, code="b523926"):
    """A copy of shipped run `rid` in `dest` as a run shipped on `shipped_at` by code version `code` would be (the
    default: a commit without the probes' solver and patching changes, so stale by ancestry and, without git, by
    the ship date): its tables without the record of what made them, one probe score moved by `probe_shift` (what
    the former solver could have given), its manifest consistent."""
    import shutil

    from workbench.store.bundle import BUNDLE, bundle_bytes

    shutil.copytree(base / "results" / rid, dest / rid)
    run = RunStore(dest, readonly=True).get(rid)
    tables = {n: run.load_table(n) for n in run.tables()}
    tables["probes"].loc[tables["probes"].index[0], "score"] += probe_shift
    (dest / rid / BUNDLE).write_bytes(bundle_bytes(tables))
    info = json.loads((dest / rid / "run.json").read_text())
    (dest / rid / "run.json").write_text(json.dumps(info | {"shipped": shipped_at, "code_version": code}))
    write_manifest(dest / rid)
    return tables


def test_verify_refresh_ships_the_tables_recomputed_in_place_of_those_made_before_their_analysis_changed(
        shipped, tmp_path, monkeypatch):
    """`verify --refresh` of a run whose probes (and what joins them) were made before the probes' solver changed:
    its metrics re-train bit for bit, so the recomputed tables replace the stale ones in the shipped store; config,
    metrics and every other table stay as shipped, run.json keeps its record and adds what was refreshed, when, by
    which code and why; the manifest checks out; a second verify judges the new tables and they agree. A tree with
    uncommitted changes is refused before anything trains."""
    import workbench.store.runstore as runstore
    from workbench.analysis.reproduce import CHANGES
    from workbench.cli import app

    base, ids = shipped
    fake, rid = tmp_path / "results", ids[2]
    before = _stale_copy(base, rid, fake)
    kept = {n: (fake / rid / n).read_bytes() for n in ("config.json", "metrics.jsonl")}
    info = json.loads((fake / rid / "run.json").read_text())
    env, mine = {"PELAB_DATA": str(base / "data")}, tmp_path / "mine"

    def provenance():  # COMPARISON.md's provenance lines on the tables
        from workbench.report.comparison import comparison_markdown

        text = comparison_markdown(RunStore(fake, readonly=True)).split("## Provenance")[1].split("\n## ")[0]
        return [ln for ln in text.splitlines() if ln.startswith("- tables ")]

    assert provenance() == ["- tables made before their analysis changed its numbers (`reproduce.CHANGES`: made by "
                            "code without the change, by git ancestry; `workbench verify` compares them with a "
                            "re-computation and does not judge them; `--refresh` re-makes "
                            "them): distance_bias of 1 run, head_summary of 1 run, patching of 1 run, probes of 1 run"]
    monkeypatch.setattr(runstore, "code_version", lambda: "abc1234-dirty")
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(mine), "-q", "--refresh"],
                             env=env)
    assert res.exit_code != 0 and "uncommitted changes (abc1234-dirty): commit or stash them" in res.output
    assert not (mine / rid).exists()  # refused before training
    monkeypatch.setattr(runstore, "code_version", lambda: "abc1234")
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(mine), "-q", "--refresh"],
                             env=env)
    assert res.exit_code == 0, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith(f"{rid}: refreshed "))
    stale = ["distance_bias", "patching", "probes", "head_summary"]  # shipped 2026-11-20: before each change
    assert all(n in line for n in stale) and "made before eccf8f7, 6a3fc22, ad1275b" in line
    assert CliRunner().invoke(app, ["check", str(fake)]).exit_code == 0  # every file matches the new manifest
    assert {n: (fake / rid / n).read_bytes() for n in kept} == kept
    now = json.loads((fake / rid / "run.json").read_text())
    record = now.pop("refreshed")
    assert now == info  # the training record as shipped
    assert len(record) == 1 and sorted(record[0]["tables"]) == sorted(stale)
    assert record[0]["code_version"] == "abc1234" and record[0]["changes"] == ["eccf8f7", "6a3fc22", "ad1275b"]
    assert record[0]["retrained"]["metrics"].startswith("equal to the shipped ones at every epoch")
    run = RunStore(fake, readonly=True).get(rid)
    truth = RunStore(base / "results", readonly=True).get(rid)  # shipped by today's code from the same weights
    pd.testing.assert_frame_equal(run.load_table("probes"), truth.load_table("probes"))  # the shift is gone
    assert abs(run.load_table("probes")["score"].iloc[0] - before["probes"]["score"].iloc[0]) > 0.04
    for n in set(before) - set(stale):  # the rest as it was, with no record made up for it
        pd.testing.assert_frame_equal(run.load_table(n), before[n])
        assert run.provenance_of(n) is None
    made = run.provenance_of("probes")
    assert made["analysed"] > CHANGES["probes"][0].landed and made["code_version"] == "abc1234"
    day = record[0]["refreshed"][:10]
    assert provenance()[0].endswith("re-makes them): none") and provenance()[1] == (
        "- tables refreshed from a re-training whose metrics equal the shipped ones at every epoch (`workbench verify "
        f"--refresh`, run.json `refreshed`; {day}): 1 run: distance_bias of 1, head_summary of 1, "
        "patching of 1, probes of 1")
    assert made["numerics"]["threads"] == record[0]["threads"]
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(mine), "-q", "--refresh"],
                             env=env)
    assert res.exit_code == 0, res.output
    assert "made by an earlier analysis" not in res.output and "not judged" not in res.output
    assert all(ln.endswith("; agrees") for ln in res.output.splitlines() if ln.startswith(("probes: ", "head_sum")))
    assert f"{rid}: nothing to refresh" in res.output


def test_verify_refreshes_nothing_unless_the_metrics_are_bit_identical(shipped, tmp_path, monkeypatch):
    """A re-training whose metrics agree only within --tol may not have the shipped weights: verified, its stale
    tables are compared but not replaced, and the shipped folder is left byte for byte."""
    import workbench.store.runstore as runstore
    from workbench.cli import app

    base, ids = shipped
    fake, rid = tmp_path / "results", ids[2]
    _stale_copy(base, rid, fake)
    rows = [json.loads(ln) for ln in (fake / rid / "metrics.jsonl").read_text().splitlines()]
    rows[-1]["test_loss"] += 1e-6
    (fake / rid / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_manifest(fake / rid)
    files = {p.name: p.read_bytes() for p in (fake / rid).iterdir()}
    monkeypatch.setattr(runstore, "code_version", lambda: "abc1234")
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(tmp_path / "mine"), "-q",
                                   "--tol", "1e-3", "--refresh", "--tables", "probes"],
                             env={"PELAB_DATA": str(base / "data")})
    assert res.exit_code == 0, res.output
    assert f"{rid}: not refreshed: its metrics agree within --tol, not bit for bit" in res.output
    assert {p.name: p.read_bytes() for p in (fake / rid).iterdir()} == files


def test_verify_refreshes_a_run_shipped_before_its_training_recorded_the_training_subset(shipped, tmp_path,
                                                                                         monkeypatch):
    """The runs trained before the training-subset evaluation existed lack `train_acc_eval` and `train_loss_eval`;
    their re-training records them beside metrics equal bit for bit. That is the shipped training (the fields it
    adds are measured on the same weights), so the stale tables are refreshed and metrics.jsonl stays as shipped,
    without them; the same re-training missing a field the shipped run recorded is not (`store.same_training`: the
    24 AMD-trained stale runs were all 'not refreshed: within --tol' on 2026-12-05 for want of it)."""
    import workbench.store.runstore as runstore
    from workbench.cli import app
    from workbench.store.run import same_training

    base, ids = shipped
    fake, rid = tmp_path / "results", ids[2]
    _stale_copy(base, rid, fake)
    rows = [json.loads(ln) for ln in (fake / rid / "metrics.jsonl").read_text().splitlines()]
    assert all("train_acc_eval" in r and "train_loss_eval" in r for r in rows)
    old = [{k: v for k, v in r.items() if k not in ("train_acc_eval", "train_loss_eval")} for r in rows]
    assert same_training(old, rows) and not same_training(rows, old)
    assert not same_training(old, rows[:-1]) and not same_training(old, [dict(r, train_loss=0.5) for r in rows])
    assert same_training(old, [dict(r, wall_s=1.0, epoch_time_s=2.0) for r in rows])  # timings aside
    (fake / rid / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    write_manifest(fake / rid)
    metrics = (fake / rid / "metrics.jsonl").read_bytes()
    monkeypatch.setattr(runstore, "code_version", lambda: "abc1234")
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(fake), "--root", str(tmp_path / "mine"), "-q",
                                   "--refresh", "--tables", "probes"], env={"PELAB_DATA": str(base / "data")})
    assert res.exit_code == 0, res.output
    assert f"{rid}: verified (bit-identical" in res.output and f"{rid}: refreshed " in res.output, res.output
    assert (fake / rid / "metrics.jsonl").read_bytes() == metrics
    assert json.loads((fake / rid / "run.json").read_text())["refreshed"][0]["tables"]


def test_verify_refresh_stops_a_retraining_at_its_first_epoch_off_the_shipped_trajectory(shipped, tmp_path,
                                                                                           monkeypatch):
    """With --refresh a re-training whose first epoch is not the shipped run's (here: the shipped record moved by
    1e-3, as another machine's floats would move it) is stopped there, resumable: said, neither verified nor refuted,
    exit 1, the shipped folder left byte for byte; a second --refresh trains nothing; verify without --refresh
    trains it on and judges it."""
    import workbench.store.runstore as runstore
    from workbench.cli import app

    base, ids = shipped
    fake, rid, mine = tmp_path / "results", ids[1], tmp_path / "mine"
    _stale_copy(base, rid, fake)
    rows = [json.loads(ln) for ln in (fake / rid / "metrics.jsonl").read_text().splitlines()]
    rows[0]["train_loss"] += 1e-3
    (fake / rid / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_manifest(fake / rid)
    files = {p.name: p.read_bytes() for p in (fake / rid).iterdir()}
    monkeypatch.setattr(runstore, "code_version", lambda: "abc1234")
    args, env = ["verify", rid, "--shipped", str(fake), "--root", str(mine), "-q"], {"PELAB_DATA": str(base / "data")}
    said = f"{rid}: not refreshed and not judged: epoch 1 of {len(rows)} is not the shipped run's (|difference| 0.001"
    # the first re-training is stopped; the second finds the copy already off the trajectory and trains nothing
    for how in ("stopped there", "your copy left the shipped run's trajectory there"):
        res = CliRunner().invoke(app, args + ["--refresh", "--tables", "probes"], env=env)
        assert res.exit_code == 1 and said in res.output and how in res.output, res.output
        copy = RunStore(mine, readonly=True).get(rid)
        assert copy.status == "interrupted" and len(copy.metric_rows()) == 1
    assert {p.name: p.read_bytes() for p in (fake / rid).iterdir()} == files
    res = CliRunner().invoke(app, args + ["--tables", "none"], env=env)
    assert "not refreshed" not in res.output and "largest difference is 0.001" in res.output, res.output
    assert RunStore(mine, readonly=True).get(rid).status == "finished"


def test_verify_epochs_compares_only_the_first_epochs_and_leaves_the_copy_to_resume(shipped, tmp_path):
    """`verify --epochs N`: the first N epochs re-trained and compared bit for bit (exit 0, not a verdict on the
    run), the copy left interrupted and used as it is the next time; a first epoch off the shipped one is said and
    exits 1; N at least the run's epochs compares all of them the same way, no table and no verdict (it became a
    whole verify, which on other numerics ends "reproduced statistically"); a plain copy of the shipped folder in
    your store is never read as this machine's epochs; with --refresh it is refused before anything trains."""
    import shutil

    from workbench.cli import app

    base, ids = shipped
    rid, env, mine = ids[0], {"PELAB_DATA": str(base / "data")}, tmp_path / "mine"
    args = ["verify", rid, "--shipped", str(base / "results"), "--root", str(mine), "-q", "--tables", "none"]
    res = CliRunner().invoke(app, args + ["--epochs", "1"], env=env)
    assert res.exit_code == 0, res.output
    assert f"{rid}: its first epoch of 2 is the shipped run's bit for bit (re-trained just now" in res.output
    copy = RunStore(mine, readonly=True).get(rid)
    assert copy.status == "interrupted" and len(copy.metric_rows()) == 1
    res = CliRunner().invoke(app, args + ["--epochs", "1"], env=env)
    assert res.exit_code == 0 and f"is the shipped run's bit for bit (your copy in {mine})" in res.output
    res = CliRunner().invoke(app, args + ["--epochs", "5"], env=env)  # all of them, resumed: still no verdict
    assert res.exit_code == 0 and f"{rid}: its first 2 epochs of 2 are the shipped run's bit for bit" in res.output, \
        res.output
    elsewhere = tmp_path / "elsewhere"  # a copy trained on other numerics (here: another BLAS) says nothing of these
    shutil.copytree(mine / rid, elsewhere / rid)
    info = json.loads((elsewhere / rid / "run.json").read_text())
    info["numerics"]["blas"] = "other-blas"
    (elsewhere / rid / "run.json").write_text(json.dumps(info))
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(base / "results"), "--root", str(elsewhere),
                                   "-q", "--epochs", "1"], env=env)
    assert res.exit_code == 1 and "was not trained on this machine as it is now (blas other-blas)" in res.output \
        and "bit for bit (" not in res.output, res.output
    plain = tmp_path / "plain"  # the shipped folder copied into a store by hand: its metrics are the shipped ones
    shutil.copytree(base / "results" / rid, plain / rid)
    res = CliRunner().invoke(app, ["verify", rid, "--shipped", str(base / "results"), "--root", str(plain), "-q",
                                   "--epochs", "1"], env=env)
    assert res.exit_code != 0 and "bit for bit" not in res.output, res.output
    res = CliRunner().invoke(app, args + [ids[2], "--epochs", "1"], env=env)  # the finished copy's first epoch read
    assert res.exit_code == 0 and res.output.rstrip().endswith(
        f"0 of 2 runs verified, 2 with their first epochs bit-identical\n  {rid}: its first epochs bit-identical, "
        f"not judged whole\n  {ids[2]}: its first epochs bit-identical, not judged whole"), res.output

    fake = tmp_path / "results"
    shutil.copytree(base / "results" / rid, fake / rid)
    rows = [json.loads(ln) for ln in (fake / rid / "metrics.jsonl").read_text().splitlines()]
    rows[0]["test_acc"] += 0.25
    (fake / rid / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_manifest(fake / rid)
    other = ["verify", rid, "--shipped", str(fake), "--root", str(tmp_path / "other"), "-q", "--epochs", "1"]
    res = CliRunner().invoke(app, other, env=env)
    assert res.exit_code == 1 and f"{rid}: epoch 1 of 2 is not the shipped run's (|difference| 0.25 in test_acc) " \
        "(re-trained just now" in res.output, res.output
    res = CliRunner().invoke(app, other + ["--refresh"], env=env)
    assert res.exit_code != 0 and "drop --epochs or --refresh" in res.output


def test_verify_stale_selects_the_runs_with_a_table_made_before_its_analysis_changed(shipped, tmp_path, monkeypatch):
    """`--stale probes` re-checks the shipped runs whose probes came before the solver changed, of those a CPU of
    this machine's vendor trained, shortest first; `--shard I/N` splits them for N processes; none left: said, exit
    0. Bad shards and a shard without --stale are refused before anything trains."""
    import shutil

    from workbench.cli import app

    base, ids = shipped
    fake = tmp_path / "results"
    _stale_copy(base, ids[0], fake, probe_shift=0.0)
    shutil.copytree(base / "results" / ids[1], fake / ids[1])  # shipped by today's code: not stale
    env, mine = {"PELAB_DATA": str(base / "data")}, tmp_path / "mine"
    args = ["verify", "--shipped", str(fake), "--root", str(mine), "-q", "--tables", "none", "--stale", "probes"]
    res = CliRunner().invoke(app, args + ["--shard", "1/2"], env=env)
    assert res.exit_code == 0, res.output
    assert "1 shipped runs of" in res.output and "a probes table made before its analysis changed" in res.output
    assert "0 of them in shard 1/2" in res.output and "no shipped run of" in res.output
    assert not mine.exists() or not any(mine.iterdir())
    with monkeypatch.context() as m:  # a machine whose kernels reach less than the run was trained at
        import torch

        m.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "DEFAULT")
        res = CliRunner().invoke(app, args, env=env)
    assert res.exit_code == 0, res.output
    assert "0 may be re-trained here bit for bit (left out: 1 at a SIMD level above this machine's)" in res.output
    res = CliRunner().invoke(app, args + ["--shard", "0/2"], env=env)
    assert res.exit_code == 0, res.output
    assert "1 of them in shard 0/2" in res.output and f"{ids[0]}: verified (bit-identical" in res.output
    assert not (mine / ids[1]).exists()
    other = ["verify", "--shipped", str(fake), "--root", str(tmp_path / "other")]
    for bad, says in ((["--stale", "probes", "--shard", "2/2"], "write I/N with 0 <= I < N"),
                      (["--stale", "probs"], "'probs' cannot be re-checked"),
                      (["--shard", "0/2"], "--shard I/N splits the runs --stale selects; add --stale")):
        res = CliRunner().invoke(app, other + bad, env=env)
        assert res.exit_code != 0 and says in res.output, res.output
    assert not (tmp_path / "other").exists()


def test_a_run_trained_on_another_cpu_vendor_cannot_be_retrained_bit_for_bit_here(monkeypatch):
    """`vendor_differs`: the vendor run.json records, else the one its CPU model names, against this machine's."""
    import workbench.store.run as run_mod
    from workbench.train.recreate import vendor_differs

    monkeypatch.setattr(run_mod, "machine_identity", lambda: {"cpu_vendor": "GenuineIntel"})
    assert vendor_differs({"machine": {"cpu": "AMD EPYC"}}) == \
        "trained on AMD EPYC (AuthenticAMD), this machine is GenuineIntel"
    assert vendor_differs({"machine": {"cpu": "Intel(R) Xeon(R) Processor @ 2.10GHz"}}) is None
    assert vendor_differs({"machine": {"cpu": "some CPU", "cpu_vendor": "AuthenticAMD"}}).endswith("GenuineIntel")
    assert vendor_differs({"machine": {"cpu": "some CPU"}}) is None  # nothing to tell by


def test_a_run_trained_at_a_simd_level_above_this_machines_cannot_be_retrained_bit_for_bit_here(monkeypatch):
    """`simd_beyond`: ATen is held down to a run's lower SIMD level, never up; an AVX-512 run on an AVX2 machine is
    named, the same or a lower level, an unrecorded one or a GPU run is not."""
    import torch

    from workbench.train.recreate import simd_beyond

    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert simd_beyond({"numerics": {"cpu_capability": "AVX512"}}) == \
        "trained at AVX512, this machine's kernels reach AVX2"
    assert simd_beyond({"machine": {"cpu_capability": "AVX512"}}) is not None  # recorded before `numerics` was
    for info in ({"numerics": {"cpu_capability": "AVX2"}}, {"numerics": {"cpu_capability": "DEFAULT"}},
                 {"machine": {"cpu": "AMD EPYC"}}, {"device": "cuda", "numerics": {"cpu_capability": "AVX512"}}):
        assert simd_beyond(info) is None, info
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    assert simd_beyond({"numerics": {"cpu_capability": "AVX512"}}) is None


def test_refresh_diff_says_what_a_refresh_changed():
    """benchmarks/refresh_diff.py's comparison of a run's tables before and after a refresh: the probes' largest
    differences, each head-summary vote flipped, deposit heads gained and lost, distance-bias bins moved, patching
    effects that became NaN."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from refresh_diff import compare

    probes = pd.DataFrame({"probe": ["head"] * 2, "layer": [0, 1], "head": [0, 0], "metric": ["acc"] * 2,
                           "level": ["head"] * 2, "score": [0.5, 0.6], "selectivity": [0.1, 0.2]})
    hs = pd.DataFrame({"layer": [0, 1], "head": [0, 0], "by_ablation": [True, True], "by_patching": [False, False],
                       "by_probe": [True, False], "by_dla": [False, False], "deposit_head": [True, False]})
    bins = pd.DataFrame({"count": [1, 2, 3]})
    patch = pd.DataFrame({"effect": [0.1, 3e5, 0.2]})
    new_hs = hs.assign(by_probe=[False, True], deposit_head=[False, True])
    out = compare({"probes": probes, "head_summary": hs, "distance_bias": bins, "patching": patch},
                  {"probes": probes.assign(score=[0.5, 0.63], selectivity=[0.08, 0.2]), "head_summary": new_hs,
                   "distance_bias": bins.assign(count=[1, 3, 2]), "patching": patch.assign(effect=[0.1, np.nan, 0.25])})
    assert out["probes_max_score_diff"] == pytest.approx(0.03)
    assert out["probes_max_selectivity_diff"] == pytest.approx(0.02)
    assert out["votes_flipped"] == {"by_ablation": 0, "by_patching": 0, "by_probe": 2, "by_dla": 0}
    assert (out["deposit_gained"], out["deposit_lost"], out["deposit_heads"]) == (["L1.H0"], ["L0.H0"], 1)
    assert out["distance_bias_bins_moved"] == [2, 3]
    assert out["patching_now_nan"] == 1 and out["patching_max_diff"] == pytest.approx(0.05)


def test_verify_stale_none_is_refused_with_what_to_write(tmp_path):
    """`verify --stale none` selected no table and then indexed the empty list (IndexError, a traceback); it is
    refused before anything, saying what to write."""
    from workbench.cli import app

    res = CliRunner().invoke(app, ["verify", "--stale", "none", "--root", str(tmp_path / "own")])
    assert res.exit_code == 2 and "--stale 'none': name the tables" in res.output and "Traceback" not in res.output


def test_a_bit_for_bit_sample_draws_only_runs_this_machine_may_retrain_bit_for_bit():
    """`verify --sample K --epochs 1` asks whether this machine reproduces the shipped floats: a run of another CPU
    vendor (or a SIMD level above this machine's) could only answer no, so it is left out of that draw and said;
    without --epochs it stays in (judged by the statistical rule). `_here` is the one partition --stale uses too."""
    from types import SimpleNamespace

    from workbench.cli.verify import _here
    from workbench.store.run import machine_identity

    here = machine_identity().get("cpu_vendor") or "AuthenticAMD"
    other = "GenuineIntel" if here != "GenuineIntel" else "AuthenticAMD"

    def run(rid, **info):
        return SimpleNamespace(id=rid, info={"device": "cpu", **info})

    runs = [run("same", machine={"cpu_vendor": here}), run("other", machine={"cpu_vendor": other}),
            run("gpu", device="cuda", gpu="NVIDIA H200")]
    fit, cpu, left = _here(runs)
    assert [r.id for r in fit] == ["same"] and [r.id for r in cpu] == ["same", "other"]
    assert left == ["1 trained on a GPU", "1 on another CPU vendor"]


def test_verify_says_unrecorded_numerics_as_unrecorded_not_as_differences(shipped, tmp_path):
    """A shipped run trained before run.json recorded its numerics, re-trained bit for bit: verify listed each
    unrecorded field as "numerics differ: ... shipped not recorded" right after "bit-identical"; it says they were
    not recorded."""
    import shutil

    from workbench.cli import app

    base, ids = shipped
    fake = tmp_path / "results"
    shutil.copytree(base / "results" / ids[0], fake / ids[0])
    info = json.loads((fake / ids[0] / "run.json").read_text())
    info.pop("numerics", None)
    (fake / ids[0] / "run.json").write_text(json.dumps(info))
    write_manifest(fake / ids[0])
    res = CliRunner().invoke(app, ["verify", ids[0], "--shipped", str(fake), "--root", str(tmp_path / "mine"), "-q",
                                   "--tables", "none"], env={"PELAB_DATA": str(base / "data")})
    assert res.exit_code == 0, res.output
    assert "bit-identical" in res.output and "numerics differ" not in res.output
    assert "numerics the shipped run did not record (trained before run.json recorded them): " in res.output


def _tier3_frame(relative_acc, rope_acc=0.99, nope_still=(), drop=(), xlong=None):
    """Tier 3's runs by hand at repro-long, Task 1, `paper` arch: NoPE at 0.15 (did not learn) and Relative at
    `relative_acc(i)` on training seeds 45-48 x data seeds 43-44, tier 1's RoPE at `rope_acc` on seeds 45-54 x 43-44,
    and seed 42 of data seed 42 of each (trained before the registration); `nope_still`: indices of NoPE runs still
    learning; `drop`: (scheme, index) of runs not shipped; `xlong`: {index: (test acc, still learning)} of tier 4's
    Relative runs at repro-xlong (24 epochs), on the same seeds."""
    rows = [{"run_id": f"t1-relative-repro-xlong-s{seed}-d{data}", "variant": "relative", "scheme": "relative",
             "task": "trigger-distance", "seed": seed, "data_seed": data, "preset": "repro-xlong",
             "test_acc": acc, "test_acc_auc": 0.5, "epochs": 24, "still_learning": still}
            for i, (seed, data) in enumerate((s, d) for d in (43, 44) for s in range(45, 49))
            for acc, still in [(xlong or {}).get(i, (None, None))] if acc is not None]
    for i, (seed, data) in enumerate([(s, d) for d in (43, 44) for s in range(45, 55)] + [(42, 42)]):
        for scheme, acc in (("nope", 0.15), ("relative", relative_acc(i)), ("rope", rope_acc)):
            if (scheme != "rope" and (seed > 48 and data != 42)) or (scheme, i) in drop:
                continue
            rows.append({"run_id": f"t1-{scheme}-repro-long-s{seed}-d{data}", "variant": scheme, "scheme": scheme,
                         "task": "trigger-distance", "seed": seed, "data_seed": data, "preset": "repro-long",
                         "test_acc": acc, "test_acc_auc": 0.5, "epochs": 12,
                         "still_learning": scheme == "nope" and i in nope_still})
    return _runs_frame(rows)


def test_tier3_reads_no_generalise_by_its_own_rule_against_tier1s_rope():
    """Tier 3 applies `nope-no-generalise-t1` to each scheme apart: NoPE not learning in all 8 runs reads
    reproduced, RoPE (tier 1's runs) learning in all of them makes it specific; Relative learning reads not
    reproduced; with RoPE not learning either the same NoPE runs cannot read reproduced (not specific); runs still
    learning are not counted, and fewer than 4 counted is too few; a missing run is interim; seed 42 is read apart,
    never pooled."""
    from workbench.analysis.claims import tier_readouts
    from workbench.report.study import tier_section, study_lines

    def tier3_readouts(frame):
        return tier_readouts(frame, 3)

    reads = tier3_readouts(_tier3_frame(lambda i: 0.95)).set_index(["group", "scheme"])
    assert list(reads.loc[("study", "nope"), ["runs", "counted"]]) == [8, 8]
    assert reads.loc[("study", "nope"), "decision"] == "reproduced (few runs)"
    assert "8 of 8 counted runs agree, Wilson 95 % [0.68, 1.00] (few runs); contrast RoPE Task 1: 0 of 20" \
        in reads.loc[("study", "nope"), "evidence"]
    assert reads.loc[("study", "relative"), "decision"] == "not reproduced (few runs)"
    assert reads.loc[("ladder seeds", "nope"), "decision"] == "inconclusive (too few seeds)"  # beside, not pooled
    assert reads.loc[("study", "nope"), "role"] == "instrument check: cannot come out otherwise"
    assert reads.loc[("study", "relative"), "role"] == "test"
    # version 3: a run whose interval contains the bar (35 % of 6,000 against 34.4 %: the status rule calls it not
    # learned on its lower bound) is not counted; version 2 counted it as agreeing
    between = _tier3_frame(lambda i: 0.35)
    between.loc[between.variant == "relative", ["learned", "status"]] = [False, "did not learn"]
    b = tier3_readouts(between).set_index(["group", "scheme"])
    assert list(b.loc[("study", "relative"), ["runs", "counted"]]) == [8, 0]
    assert b.loc[("study", "relative"), "decision"] == "inconclusive (too few seeds)"
    assert "its interval contains the bar, not counted" in b.loc[("study", "relative"), "evidence"]
    both_fail = tier3_readouts(_tier3_frame(lambda i: 0.15, rope_acc=0.15)).set_index(["group", "scheme"])
    assert both_fail.loc[("study", "nope"), "decision"] == "inconclusive (not specific)"
    still = tier3_readouts(_tier3_frame(lambda i: 0.95, nope_still={0, 1, 2, 3, 10})).set_index(["group", "scheme"])
    assert list(still.loc[("study", "nope"), ["runs", "counted"]]) == [8, 3]
    assert still.loc[("study", "nope"), "decision"] == "inconclusive (too few seeds)"
    interim = tier3_readouts(_tier3_frame(lambda i: 0.95, drop={("relative", 11)})).set_index(["group", "scheme"])
    assert interim.loc[("study", "relative"), "decision"] == "not reproduced (few runs; interim: 7 of 8 runs)"
    one = tier3_readouts(_tier3_frame(lambda i: 0.95, drop={("relative", i) for i in range(1, 21)}))
    assert one.set_index(["group", "scheme"]).loc[("study", "relative"), "decision"] == \
        "inconclusive (too few seeds) (interim: 1 of 8 runs)"  # interim whatever it reads
    none = tier3_readouts(_tier3_frame(lambda i: 0.95, drop={("relative", i) for i in range(21)}))
    assert none.set_index(["group", "scheme"]).loc[("study", "relative"), "decision"] == "pending (0 of 8 runs)"
    frame = _tier3_frame(lambda i: 0.95)
    text = tier_section(frame, 3, tier3_readouts(frame))
    assert text.startswith("### Tier 3: NoPE and Relative on Task 1 at `repro-long`")
    assert "Study runs shipped: 16 of 16" in text
    assert text.index("permutation-invariant") < text.index("| group |")  # what differs, before the results
    lines = "\n".join(study_lines(pd.DataFrame(columns=["group"]), pd.DataFrame(columns=["group"]), None,
                                  {3: tier3_readouts(frame)}))
    assert "- study, NoPE (instrument check: cannot come out otherwise): 8 of 8 runs counted: **reproduced (few runs)**" \
        in lines


def test_tier3_refuses_a_rule_other_than_the_one_it_was_registered_for(monkeypatch):
    """`[study.tier3]` (and `[study.tier4]`) pins the claim's version it is read by: a registry whose claim moved on is refused, with what
    to do, rather than read tier 3's runs by a rule fixed after them."""
    import tomllib

    from workbench.analysis.claims import study
    from workbench.analysis.claims.registry import REGISTRY, parse_registry

    with open(REGISTRY, "rb") as f:
        data = tomllib.load(f)
    next(c for c in data["claim"] if c["id"] == "nope-no-generalise-t1")["version"] = 4
    monkeypatch.setattr(study, "load_registry", lambda: parse_registry(data))
    with pytest.raises(ValueError, match="version 3, and the registry holds version 4: register the tier again"):
        study.tier_readouts(_tier3_frame(lambda i: 0.95), 3)
    with pytest.raises(ValueError, match="study tier 4 is registered to be read by nope-no-generalise-t1 version 3"):
        study.tier_readouts(_tier3_frame(lambda i: 0.95), 4)  # tier 4 pins the same version


def test_tier4_reads_relative_at_24_epochs_apart_from_tier3_with_the_same_seeds_beside():
    """Tier 4 reads Relative's runs at repro-xlong by the same rule, never pooling tier 3's runs of the same seeds
    (at repro-long): with tier 3's Relative still learning (not counted) and tier 4's at the ceiling and settled,
    tier 4 reads not reproduced and tier 3 stays inconclusive; a tier-4 run still learning is not counted; its
    section shows each run beside tier 3's run of the same seeds, and says what differs from the paper first."""
    from workbench.analysis.claims import share_tiers, tier_readouts, tier_runs
    from workbench.report.study import tier_section, study_lines

    assert share_tiers() == [3, 4]
    settled = {i: (0.99, False) for i in range(8)}
    frame = _tier3_frame(lambda i: 0.99, xlong=settled)
    frame.loc[(frame.variant == "relative") & (frame.preset == "repro-long"), ["still_learning", "settled", "status"]] \
        = [True, False, "still learning"]
    t3 = tier_readouts(frame, 3).set_index(["group", "scheme"])
    t4 = tier_readouts(frame, 4).set_index(["group", "scheme"])
    assert t3.loc[("study", "relative"), "decision"] == "inconclusive (still learning)"  # tier 3: none counted
    assert list(t4.index) == [("study", "relative")]  # Relative alone; tier 3's runs are not tier 4's
    assert list(t4.loc[("study", "relative"), ["runs", "counted"]]) == [8, 8]
    assert t4.loc[("study", "relative"), "decision"] == "not reproduced (few runs)"
    assert t4.loc[("study", "relative"), "role"] == "test"
    late = tier_readouts(_tier3_frame(lambda i: 0.99, xlong=settled | {0: (0.99, True), 1: (0.99, True),
                                                                      2: (0.99, True), 3: (0.99, True),
                                                                      4: (0.99, True)}), 4)
    assert late.set_index(["group", "scheme"]).loc[("study", "relative"), "decision"] == \
        "inconclusive (too few seeds)"  # 3 of 8 settled: too few counted
    half = tier_readouts(_tier3_frame(lambda i: 0.99, xlong={i: (0.99, False) for i in range(5)}), 4)
    assert half.decision.iloc[0] == "not reproduced (few runs; interim: 5 of 8 runs)"
    beside = tier_runs(frame, 4)
    assert len(beside) == 8 and set(beside.earlier_tier) == {3} and set(beside.earlier_preset) == {"repro-long"}
    assert set(beside.scheme) == {"relative"} and beside.earlier_run.str.contains("repro-long").all()
    assert (beside.earlier_status == "still learning").all() and (beside.status == "ceiling").all()
    assert tier_runs(frame, 3).earlier_run.isna().all()  # tier 3 has no earlier share tier
    text = tier_section(frame, 4, tier_readouts(frame, 4))
    assert text.startswith("### Tier 4: Relative on Task 1 at `repro-xlong`")
    assert text.index("Not the paper's setup") < text.index("| group |")
    assert "Study runs shipped: 8 of 8 (`make study TIER=4`)" in text and "ladder seeds" not in text
    assert "tier 3 (`repro-long`): 99.00 (still learning)" in text and "cannot come out otherwise" not in text
    lines = "\n".join(study_lines(pd.DataFrame(columns=["group"]), pd.DataFrame(columns=["group"]), None,
                                  {4: tier_readouts(frame, 4)}))
    assert "Tier 4 (Relative on Task 1 at `repro-xlong`, 8 runs" in lines
    assert "- study, Relative: 8 of 8 runs counted: **not reproduced (few runs)**" in lines


def test_a_run_trained_at_a_lower_simd_level_has_its_tables_re_checked_held_to_it(shipped, tmp_path, capsys):
    """`recompute_tables(env=...)` re-makes the tables in a child started held (ATen reads its level once): they
    record the held level, and on the same weights come out as this process's up to the level's rounding.
    `verify`'s re-check holds them where the run was trained at a lower level than this machine's
    (`recreate.simd_hold`), as its re-training is held (t1-alibi-repro-long-s42, AVX2 on AVX-512: ablation and
    spectral differed unheld, equal held)."""
    import shutil

    import torch

    from workbench.analysis.reproduce import recompute_tables, table_agreement
    from workbench.cli.verify import _recheck_tables

    if torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip("this machine's ATen runs its DEFAULT kernels: there is no lower level to hold a re-check to")
    base, ids = shipped
    rid, names = ids[0], ["ablation", "qk_means"]
    src = RunStore(base / "results", readonly=True).get(rid)
    rerun = RunStore(base / "runs", data_dir=base / "data").get(rid)
    here, _, made_here = recompute_tables(rerun, src, names)
    held, params, made = recompute_tables(rerun, src, names, env={"ATEN_CPU_CAPABILITY": "default"})
    assert made["ablation"]["numerics"]["cpu_capability"] == "DEFAULT" != made_here["ablation"]["numerics"][
        "cpu_capability"] and params["threads"] == 1 and sorted(held) == names
    for n in names:
        a = table_agreement(here[n], held[n])
        assert list(held[n].columns) == list(here[n].columns) and a["max_abs"] < 1e-3, (n, a["why"])
    # verify's re-check of a run whose run.json records the DEFAULT level: held, and said so
    fake = tmp_path / "results"
    shutil.copytree(base / "results" / rid, fake / rid)
    info = json.loads((fake / rid / "run.json").read_text())
    info["numerics"]["cpu_capability"] = "DEFAULT"
    (fake / rid / "run.json").write_text(json.dumps(info))
    write_manifest(fake / rid)
    wrong, _, _ = _recheck_tables(RunStore(fake, readonly=True).get(rid), rerun, ["qk_means"], 1e-3, judged=True)
    out = capsys.readouterr().out
    assert "ATen held to DEFAULT (ATEN_CPU_CAPABILITY=default), as trained" in out and wrong == [], out
