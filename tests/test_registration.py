"""The registration (workbench/analysis/claims/registry.toml, docs/preregistration.md): every rule quotes the paper
verbatim, the file is complete, and the seed study's grid trains exactly the registered seeds."""
from pathlib import Path

import pytest

from workbench.analysis.claims.registry import REGISTRY, load_registry, parse_registry
from workbench.store.runstore import run_id_for
from workbench.train.presets import resolve_config
from workbench.train.sweep import grid_points, load_grid

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT.parent / "shared" / "seeds" / "003_4cc2604f4f6d436e.txt"

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]


def test_every_quote_is_the_papers_own_sentence():
    if not PAPER.is_file():
        pytest.skip(f"the paper's text is not at {PAPER} (shared/ is beside the checkout in CI and sessions)")
    text = PAPER.read_text()
    reg = load_registry()
    missing = [c["id"] for c in reg.claims if c["quote"] not in text]
    assert not missing, f"quotes not found verbatim in the paper: {missing}"


def test_registry_is_complete_and_its_numbers_are_the_registered_ones():
    reg = load_registry()
    assert len({c["id"] for c in reg.claims}) == len(reg.claims)
    assert reg.deposit["thresholds"][0] == 0.05 and 0.10 in reg.deposit["thresholds"]
    assert reg.decision["share"]["against"] == 0.5
    headline = [c["id"] for c in reg.claims if c.get("headline")]
    assert headline == ["rope-deposit-first-layer", "mla-no-indispensable-head"] == reg.study["claims"]
    assert "layer 0" in reg.claim("rope-deposit-first-layer")["agree"]  # the paper's first layer, not <= 1
    assert reg.claim("partial-rope-deeper")["task"] == "trigger-distance"  # the paper ran it on Task 1 (C.1)
    assert reg.claim("alibi-converges-poorly")["decision"] == "not testable"
    with pytest.raises(KeyError, match="no registered claim"):
        reg.claim("nope")


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["claim"][0].pop("quote"), "missing"),
    (lambda d: d["claim"][0].update(decision="vote"), "is not one of"),
    (lambda d: d["claim"][1].update(id=d["claim"][0]["id"]), "twice"),
    (lambda d: d["study"]["claims"].append("no-such-claim"), "not registered"),
    (lambda d: d["study"]["tier2"]["claims"].append("no-such-claim"), "not registered"),
    (lambda d: d["claim"][0].pop("agree"), "needs `agree`"),
])
def test_a_broken_registry_names_the_claim_and_field(mutate, message):
    data = tomllib.loads(REGISTRY.read_text())
    mutate(data)
    with pytest.raises(ValueError, match=message):
        parse_registry(data)


def test_the_study_grid_trains_exactly_the_registered_seeds():
    reg = load_registry()
    study = reg.study
    points = grid_points(load_grid(ROOT / study["grid"]), tiers=[1])
    got = {(p["scheme"], p["seed"], dict(p["sets"]).get("task.seed"), p["preset"], p["task"]) for p in points}
    want = {(s, t, d, study["preset"], study["task"]) for s in study["schemes"] for t in study["train_seeds"]
            for d in study["data_seeds"]}
    assert got == want and len(points) == len(want) == 40
    t2 = study["tier2"]  # tier 2 likewise: its grid tier trains exactly the seeds registered in [study.tier2]
    points = grid_points(load_grid(ROOT / study["grid"]), tiers=[t2["grid_tier"]])
    got = {(p["scheme"], p["seed"], dict(p["sets"]).get("task.seed"), p["preset"], p["task"]) for p in points}
    want = {(s, t, d, t2["preset"], t2["task"]) for s in t2["schemes"] for t in t2["train_seeds"]
            for d in t2["data_seeds"]}
    assert got == want and len(points) == 28


def test_data_seeds_are_a_grid_axis_and_name_the_run():
    grid = {"preset": "smoke", "schemes": ["rope"], "seeds": [1, 2], "data_seeds": [42, 7]}
    points = grid_points(grid)
    assert [(p["seed"], dict(p["sets"])["task.seed"]) for p in points] == [(1, 42), (2, 42), (1, 7), (2, 7)]
    ids = [run_id_for(resolve_config(**p)) for p in points]
    assert len(set(ids)) == 4
    assert "-d7-" in ids[2] and "-d" not in ids[0].split("-s1-")[1][:2]  # the default data seed is not named
    plain = grid_points({"preset": "smoke", "schemes": ["rope"], "seeds": [1]})
    assert plain[0]["sets"] == []  # no data_seeds: the preset's data seed, the same run ids as before
    assert run_id_for(resolve_config(**plain[0])) == ids[0]
