"""What pages open on (issue 42): the headline shipped run (`paper` arch RoPE, Task 1, `repro`, seed 42), or the
user's newest learned run; a page that runs the model prefers a run with weights; the Runs page opens on the
user's runs and on the setting its URL filters keep. Hand-made indexes, no store."""
from __future__ import annotations

import pandas as pd

from apps import common as C
from apps.pages.runs import opening_setting


def row(rid, scheme="rope", preset="repro", setting="paper", variant=None, task="trigger-distance", seed=42,
        acc=1.0, source="shipped", created="2026-11-01T00:00:00+00:00"):
    """An index row as `C.index` gives it; `run_status` (the registered rules' reading) is set by hand here."""
    return {"id": rid, "scheme": scheme, "preset": preset, "setting": setting, "variant": variant or scheme,
            "task": task, "seed": seed, "test_acc": acc, "status": "finished", "source": source, "created": created,
            "run_status": "learned" if acc > 0.5 else "did not learn"}


SHIPPED = [row("t1-rope-repro-wide-s42", preset="repro-wide"), row("t1-rope-repro-long-s42", preset="repro-long"),
           row("t1-rope-authors-s42", setting="authors"), row("t1-rope-repro-s43", seed=43),
           row("t1-nope-repro-s42", scheme="nope", acc=0.15), row("t1-rope-repro-s42"),
           row("t2-rope-repro-s42", task="trigger-count")]


def test_the_shipped_results_open_on_the_headline_run_whatever_their_order():
    for order in (SHIPPED, SHIPPED[::-1]):
        assert C.default_run(pd.DataFrame(order)) == "t1-rope-repro-s42"


def test_the_users_newest_learned_run_comes_before_the_shipped_ones():
    own = [row("old", preset="cpu", source="own", created="2026-11-02T00:00:00+00:00"),
           row("new", preset="cpu", source="own", created="2026-11-03T00:00:00+00:00"),
           row("unlearned", preset="cpu", source="own", acc=0.1, created="2026-11-04T00:00:00+00:00")]
    assert C.default_run(pd.DataFrame(SHIPPED + own)) == "new"
    assert C.default_run(pd.DataFrame(SHIPPED + own), want="old") == "old"


def test_a_page_that_runs_the_model_prefers_a_run_with_weights():
    own = [row("my-nope", scheme="nope", preset="cpu", source="own", acc=0.9)]
    df = pd.DataFrame(SHIPPED + own)
    assert C.default_run(df) == "my-nope"  # the user's learned run, before the shipped RoPE
    assert C.default_run(df, need_weights=True) == "my-nope"
    assert C.default_run(pd.DataFrame(SHIPPED), need_weights=True) == "t1-rope-repro-s42"  # none has weights


def test_the_runs_page_opens_on_the_users_runs_and_on_what_its_filters_keep():
    shipped = pd.DataFrame(SHIPPED)
    assert opening_setting(shipped, None, {}) == "repro/paper"
    mine = pd.DataFrame(SHIPPED + [row("demo-rope", preset="cpu", source="own")])
    assert opening_setting(mine, None, {}) == "cpu/paper"  # the demo's runs while it trains
    more = pd.DataFrame(SHIPPED + [row(f"s{i}", preset="smoke", source="own") for i in range(3)]
                        + [row("newest-cpu", preset="cpu", source="own", created="2026-12-01T00:00:00+00:00")])
    assert opening_setting(more, None, {}) == "smoke/paper"  # most of the user's runs, not the one just started
    assert opening_setting(mine, "repro/authors", {}) == "repro/authors"  # asked for
    assert opening_setting(shipped, None, {"preset": "repro-long"}) == "repro-long/paper"
    assert opening_setting(shipped, None, {"preset": "cpu"}) is None  # no run kept: every setting, not a contradiction
