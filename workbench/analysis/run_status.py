"""Moved: what a run can show lives in `workbench.analysis.claims.status` (beside the claims that read it). This
name is kept so imports written before the move keep working."""
from .claims.status import STATUSES, StatusRules, run_status, settle_window, wilson  # noqa: F401
