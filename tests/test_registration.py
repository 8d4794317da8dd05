"""The registration (workbench/analysis/claims/registry.toml, docs/preregistration.md): every rule quotes the paper
verbatim, the file is complete, and the seed study's grid trains exactly the registered seeds."""
from pathlib import Path

import pytest

from workbench.analysis.claims.registry import REGISTRY, load_registry, parse_registry
from workbench.analysis.claims.study import registered_tiers
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
    also = [(c["id"], a.split('"')[1]) for c in reg.claims for a in c.get("also", [])]  # 'section: "quote" (note)'
    assert len(also) >= 3 and all(q for _, q in also)
    missing = [(cid, q) for cid, q in also if q not in text]
    assert not missing, f"`also` quotes not found verbatim in the paper: {missing}"


def test_the_registered_schemes_decide_which_rows_a_claim_judges():
    """`also_schemes` (the sentence names Relative beside NoPE) is what the code judges, in the `paper` arch only;
    a scheme the registry does not name is refused."""
    from workbench.analysis.claims.registry import registered_schemes, registered_settings

    assert registered_schemes("nope-no-generalise-t1") == ("nope", "relative")
    assert registered_settings("nope-no-generalise-t1", "relative") == ("paper",)
    assert registered_settings("nope-no-generalise-t1", "nope") == ("paper", "authors")
    with pytest.raises(ValueError, match="registered for"):
        registered_settings("nope-no-generalise-t1", "alibi")


def test_each_caveat_reaches_the_registration_table_and_comparison():
    """A registered `caveat` (the quote does not state the direction tested) is shown beside the rule: in the
    registration table (the Findings page, reports) and under COMPARISON.md's rules table."""
    import pandas as pd

    from workbench.analysis.claims import registration_table
    from workbench.report.study import registration_section

    reg = load_registry()
    with_caveat = [c["id"] for c in reg.claims if c.get("caveat")]
    assert set(with_caveat) == {"rope-beats-mla-t1", "mla-beats-rope-t2", "nope-beats-rope-t2", "nope-no-generalise-t1"}
    cl = pd.DataFrame(columns=["claim_id", "runs"])
    runs = pd.DataFrame(columns=["run_id", "started"])
    t = registration_table(cl, runs).set_index("rule")
    assert t.loc["mla-beats-rope-t2", "caveat"].startswith("the quoted sentence (C.3") and t.loc["random-overfits",
                                                                                              "caveat"] == ""
    text = registration_section(cl, runs, [])
    assert "Caveats registered beside a rule (`caveat`): where its quoted sentence does not itself state" in text
    assert all(f"- `{cid}`: " in text for cid in with_caveat)


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
    (lambda d: d["study"]["tier4"]["claims"].append("no-such-claim"), "not registered"),
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
    sizes = {}
    for tier in registered_tiers()[1:]:  # each later tier likewise: its grid tier trains exactly its registered seeds
        tn = study[f"tier{tier}"]
        assert tn["grid_tier"] == tier
        points = grid_points(load_grid(ROOT / study["grid"]), tiers=[tier])
        got = {(p["scheme"], p["seed"], dict(p["sets"]).get("task.seed"), p["preset"], p["task"]) for p in points}
        want = {(s, t, d, tn["preset"], tn["task"]) for s in tn["schemes"] for t in tn["train_seeds"]
                for d in tn["data_seeds"]}
        assert got == want and len(points) == len(want)
        sizes[tier] = len(points)
    assert sizes == {2: 28, 3: 16, 4: 8}


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


def test_a_run_of_any_tier_is_a_study_run_never_pooled_with_the_rest(monkeypatch):
    """`is_study` reads every tier's seeds, not tier 1's alone: a tier registering a training seed outside tier 1's
    keeps its runs out of the `repro` claims and the ladder."""
    import pandas as pd

    from workbench.analysis.claims import runs as runs_mod

    data = tomllib.loads(REGISTRY.read_text())
    data["study"]["tier4"]["train_seeds"] = [60]
    monkeypatch.setattr(runs_mod, "load_registry", lambda: parse_registry(data))
    frame = pd.DataFrame({"seed": [42, 60, 45], "data_seed": [42, 42, 42]})
    assert list(runs_mod.is_study(frame)) == [False, True, True]
