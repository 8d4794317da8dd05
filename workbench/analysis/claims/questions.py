"""The questions issue 13 asks of the reproduction, answered from the claims' verdicts."""
from __future__ import annotations

import pandas as pd

from ..common import tuples
from ..settings import SETTINGS
from .deposits import ROPE_SHALLOW


# The questions issue 13 asks of the reproduction: (question, the claim rows that answer it, the answer when the
# claim is reproduced, when it is not, the settings that answer it: None = all)
QUESTIONS = (
    ("Does RoPE put its positional computation in one shallow head (Task 1)?",
     ROPE_SHALLOW, "yes", "no", None),
    ("Does MLA's Task 2 advantage over RoPE survive when MLA runs in the same architecture as RoPE?",
     "MLA beats RoPE on Task 2", "yes", "no", ("paper", "encoder", "decoder")),
    ("Is there an indispensable head in MLA when heads are actually ablated?",
     "MLA has no indispensable single head", "no", "yes", None),
)


ANSWER_OF = {"mixed": "mixed (the share of agreeing runs may lie on either side of 1/2)", "inconclusive (did not learn)": "cannot tell (the model did not learn)",
             "inconclusive (ceiling)": "cannot tell (both at the ceiling)",
             "inconclusive (within seed spread)": "cannot tell (within the seeds' spread)",
             "inconclusive (still learning)": "cannot tell (not settled by its last epoch)",
             "inconclusive (one seed)": "cannot tell (one seed)",
             "inconclusive (too few seeds)": "cannot tell (fewer than 4 counted runs)",
             "inconclusive (not specific)": "cannot tell (the contrasted scheme passes the same rule)",
             "inconclusive (specificity not shown)": "cannot tell (the rule is not shown to fail on the contrasted "
                                                     "scheme)",
             "inconclusive (few pairs)": "cannot tell (fewer than 3 paired runs)",
             "not testable at this preset": "cannot tell at this preset", "pending": "not known yet"}


def answer_of(result: str, yes: str = "yes", no: str = "no") -> str:
    """A claim's outcome said as the answer to its question: `yes` if reproduced, `no` if not, else ANSWER_OF."""
    return {"reproduced": yes, "not reproduced": no}.get(result) or ANSWER_OF[result]


def answers(cl: pd.DataFrame) -> pd.DataFrame:
    """QUESTIONS answered from the claims' verdicts: one row per (question, setting[, task]) with the answer
    (yes / no / in some seeds only / cannot tell / not known yet), the verdict and its evidence."""
    rows = []
    for question, prefix, yes, no, settings in QUESTIONS:
        sub = cl[cl.claim.str.startswith(prefix)]
        for r in tuples(sub[sub.setting.isin(settings)] if settings else sub):
            task = f", {r.claim.split(', ')[-1]}" if ", Task" in r.claim else ""
            rows.append({"question": question, "setting": SETTINGS.get(r.setting, r.setting) + task,
                         "answer": answer_of(r.result, yes, no),
                         "verdict": r.verdict, "evidence": r.evidence})
    return pd.DataFrame(rows, columns=["question", "setting", "answer", "verdict", "evidence"])
