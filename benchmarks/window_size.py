"""How much of this checkout a GPU window's call sends, against the device tool's limit (64 MiB): the tracked files,
the untracked files git does not ignore, and the carried paths (.whl). Run before a window (`make gpu-wheels` does):
a call over the limit is refused, so it fails here first and says what to leave behind.

    python benchmarks/window_size.py [--carry .whl] [--limit-mib 64]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

LIMIT_MIB = 64


def tree_files(repo: Path) -> list[tuple[str, Path]]:
    """(relative name, path) of what a call sends of the checkout: tracked files and untracked ones git does not ignore,
    those that exist as regular files."""
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, check=True).stdout
    listed = sorted({p for p in out.decode().split("\0") if p})
    return [(rel, repo / rel) for rel in listed if (repo / rel).is_file() and not (repo / rel).is_symlink()]


def travelling(repo: Path, carry: tuple[str, ...] = (".whl",),
               leave_out: Path | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """({"tree": bytes, each carried path: bytes}, {top-level folder: bytes} of the tree, largest first): what a call
    sends, without `leave_out` (a file about to be replaced)."""
    skip = leave_out.resolve() if leave_out is not None else None
    tops: dict[str, int] = {}
    for rel, f in tree_files(repo):
        if f.resolve() != skip:
            top = rel.split("/", 1)[0] if "/" in rel else "(files at the root)"
            tops[top] = tops.get(top, 0) + f.stat().st_size
    parts = {"tree": sum(tops.values())} | {c: carried_bytes(repo / c, skip) for c in carry}
    return parts, dict(sorted(tops.items(), key=lambda kv: -kv[1]))


def carried_bytes(path: Path, skip: Path | None = None) -> int:
    """The bytes of a carried path (a file, or a folder with what lies below it), without `skip`; 0 where absent."""
    files = sorted(path.rglob("*")) if path.is_dir() else [path]
    return sum(f.stat().st_size for f in files if f.is_file() and f.resolve() != skip)


def travel_bytes(repo: Path, carry: tuple[str, ...] = (".whl",), leave_out: Path | None = None) -> int:
    """What a call sends, in bytes: the tree and the carried paths, without `leave_out`."""
    return sum(travelling(repo, carry, leave_out)[0].values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--carry", action="append", default=None, help="a carried path (default: .whl)")
    ap.add_argument("--limit-mib", type=float, default=LIMIT_MIB)
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1])
    a = ap.parse_args(argv)
    parts, tops = travelling(a.repo, tuple(a.carry or [".whl"]))
    total = sum(parts.values())
    mib = lambda n: f"{n / 2**20:.1f} MiB"  # noqa: E731
    print(f"a window's call sends {mib(total)} of its {a.limit_mib:g} MiB: "
          + ", ".join(f"{k} {mib(v)}" for k, v in parts.items()) + "; largest in the tree: "
          + ", ".join(f"{k} {mib(v)}" for k, v in list(tops.items())[:5]))
    if total > a.limit_mib * 2**20:
        print(f"ERROR: over the device tool's {a.limit_mib:g} MiB by {mib(total - a.limit_mib * 2**20)}: the call "
              "would be refused. Move what the window does not need out of the tracked tree, or carry fewer wheels.",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
