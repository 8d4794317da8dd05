"""A shipped run's analysis tables as ONE parquet file, `<run>/tables.parquet` (written by `workbench ship`).

Layout: the tables are stacked row-wise into one parquet table whose columns are the union of theirs by name
(a name two tables give different types is kept apart as `<table>/<column>`); a row of table A holds nulls in
the columns only table B has. The file's key-value metadata `pelab.tables` records, per table, its first row, row
count and its columns (indices into the file's columns, in the table's order), so `read_table` returns exactly the
table that went in (columns, order, dtypes). Stacking by name stores columns every table has (`run_id`, `layer`,
`head`, ...) once and the parquet footer once: with float32 values, byte-stream-split floats and zstd level 19 the
repository's 105 shipped runs take 0.63 of the space of one file per table (measured in docs/store.md).

Run in `workbench.store.run` reads it transparently: `run.tables()`, `run.load_table(name)` see a table whether it
is its own `tables/<name>.parquet` (the run store: analyses write one file per table) or in the bundle.
"""
from __future__ import annotations

import functools
import io
import json
import os
from typing import TYPE_CHECKING

from .atomic import stat_key

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

BUNDLE = "tables.parquet"
META_KEY = b"pelab.tables"
PROVENANCE_KEY = b"pelab.provenance"  # what made a table (`run.table_provenance`): in a table file, and here per table


def bundle_bytes(tables: "dict[str, pd.DataFrame]", provenance: "dict[str, dict] | None" = None) -> bytes:
    """`tables` ({name: DataFrame}) as one parquet file: float64 columns stored as float32 (7 significant digits;
    integers, strings and booleans exactly), floats byte-stream-split, zstd 19, no statistics or pandas
    metadata; `provenance` ({name: what made it}, `store.run.table_provenance`) kept in its metadata."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    types: dict[str, pa.DataType] = {}
    parts: dict[str, list] = {}
    meta, offset = {}, 0
    arrow = {}
    for name, df in tables.items():
        narrow = df.astype({c: np.float32 for c in df.columns if df[c].dtype == np.float64})
        arrow[name] = t = pa.Table.from_pandas(narrow, preserve_index=False).replace_schema_metadata(None)
        if len(set(t.column_names)) != t.num_columns:
            raise ValueError(f"table {name!r} has duplicate column names; they cannot be shipped")
    for name, t in arrow.items():
        keys = []
        for field in t.schema:
            key = field.name if types.get(field.name, field.type) == field.type else f"{name}/{field.name}"
            if key not in types:
                types[key], parts[key] = field.type, [pa.nulls(offset, field.type)]
            keys.append(key)
        for key in types:
            parts[key].append(t.column(keys.index(key)).combine_chunks() if key in keys
                              else pa.nulls(t.num_rows, types[key]))
        meta[name] = [offset, t.num_rows, [list(types).index(k) for k in keys]]
        offset += t.num_rows
    columns = [pa.concat_arrays(parts[k]) for k in types]
    table = pa.Table.from_arrays(columns, names=list(types))
    floats = [k for k, t in types.items() if pa.types.is_floating(t)]
    buf = io.BytesIO()
    with pq.ParquetWriter(buf, table.schema, compression="zstd", compression_level=19, write_statistics=False,
                          store_schema=False, use_dictionary=[k for k in types if k not in floats],
                          column_encoding={k: "BYTE_STREAM_SPLIT" for k in floats}) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({META_KEY.decode(): json.dumps(meta, separators=(",", ":"))})
        kept = {name: p for name, p in (provenance or {}).items() if p and name in tables}
        if kept:
            writer.add_key_value_metadata({PROVENANCE_KEY.decode(): json.dumps(kept, separators=(",", ":"))})
    return buf.getvalue()


def bundle_provenance(path: str | os.PathLike) -> "dict[str, dict]":
    """{table: what made it} as the bundle records it ({} for a bundle shipped before tables recorded it); read
    from the footer once per state of the file, like the table index."""
    return dict(_footer(os.path.realpath(path), stat_key(path))[2])


def _read_footer(path: str, stat: tuple | None) -> tuple[tuple[str, ...], dict[str, list], dict[str, dict]]:
    """The bundle's column names, table index and provenance records (`stat`: the file's `stat_key`, only a key
    of the memo below)."""
    import pyarrow.parquet as pq

    md = pq.read_metadata(path)
    raw = (md.metadata or {}).get(META_KEY)
    if raw is None:
        raise ValueError(f"no {META_KEY.decode()} metadata: not a table bundle")
    made = (md.metadata or {}).get(PROVENANCE_KEY)
    return tuple(md.schema.names), json.loads(raw), json.loads(made) if made else {}


def _read_table(path: str, stat: tuple | None, name: str) -> "pd.DataFrame":
    """Table `name` of the bundle. Its rows are taken (copied): a slice would keep the decoded columns of every
    table in the file alive while it is memoised (1.2 GB for the 465 tables a comparison reads)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    names, meta, _ = _footer(path, stat)
    offset, rows, idx = meta[name]
    cols = [names[i] for i in idx]
    t = pq.read_table(path, columns=cols).take(pa.array(range(offset, offset + rows), type=pa.int64()))
    return t.rename_columns([c.split("/", 1)[1] if c.startswith(f"{name}/") else c for c in cols]).to_pandas()


# Decoded once per (path, `stat_key`): a report reads a run's tables several times (`comparison_markdown` on
# results/repro: 778 reads of 245 runs' bundles, 465 of them different; 31 s -> 23 s here, the same memory).
# A file without a key yet (changed in the last 2 s) is read afresh.
_cached_footer = functools.lru_cache(maxsize=4096)(_read_footer)
_cached_table = functools.lru_cache(maxsize=1024)(_read_table)


def _footer(path: str, stat: tuple | None) -> tuple[tuple[str, ...], dict[str, list], dict[str, dict]]:
    return (_cached_footer if stat else _read_footer)(path, stat)


def bundle_names(path: str | os.PathLike) -> list[str]:
    """Names of the tables in a bundle (reads the footer only)."""
    return sorted(_footer(os.path.realpath(path), stat_key(path))[1])


def read_bundle_table(path: str | os.PathLike, name: str) -> "pd.DataFrame":
    """Table `name` of a bundle, as it went in (KeyError if absent); a new DataFrame each call."""
    path, stat = os.path.realpath(path), stat_key(path)
    return _cached_table(path, stat, name).copy() if stat else _read_table(path, stat, name)
