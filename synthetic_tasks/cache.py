"""On-disk cache: `<cache_dir>/<task>-<key12>/{data.npz, manifest.json}`, written atomically.

`key` = sha256 of the canonical spec JSON + generator version (known before generating, so it names the
folder); the manifest's `hash` is the content hash of the arrays, checked on every load.
"""
import datetime
import hashlib
import json
import os
import shutil
import tempfile
import warnings
import zipfile

import numpy as np

from . import generators
from .dataset import Dataset
from .specs import spec_from_dict

DATA, MANIFEST = "data.npz", "manifest.json"


class CacheError(ValueError):
    """A cache folder that does not hold what its manifest says."""


def default_cache_dir():
    """$PELAB_DATA, else ./data_cache."""
    return os.environ.get("PELAB_DATA") or "data_cache"


def spec_key(spec):
    return hashlib.sha256(f"{spec.to_json()}|v{generators.GENERATOR_VERSION}".encode()).hexdigest()


def cache_path(spec, cache_dir=None):
    return os.path.join(cache_dir or default_cache_dir(), f"{spec.task}-{spec_key(spec)[:12]}")


def _write(ds, folder):
    """Write data.npz (uint16 when ids fit, else int64; compressed) and manifest.json into `folder`."""
    arrays = generators.arrays_of(ds.trigger_ids, (ds.train_x, ds.train_y), (ds.test_x, ds.test_y), ds.extrap)
    dtype = np.uint16 if ds.vocab_size <= 65536 and ds.n_classes <= 65536 else np.int64
    np.savez_compressed(os.path.join(folder, DATA), **{k: v.astype(dtype) for k, v in arrays.items()})
    with open(os.path.join(folder, MANIFEST), "w") as f:
        json.dump(ds.manifest, f, indent=1)


def save(ds, folder):
    """Write `ds` to `folder` atomically (temp folder in the same parent, then rename)."""
    parent = os.path.dirname(os.path.abspath(folder))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(folder)}.tmp-", dir=parent)
    try:
        os.chmod(tmp, 0o755)                           # mkdtemp makes it 0700
        ds.manifest["created"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        _write(ds, tmp)
        if os.path.exists(folder):                     # a corrupt/stale folder being replaced
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(folder)}.old-", dir=parent)
            os.replace(folder, os.path.join(old, "x"))
            shutil.rmtree(old)
        try:
            os.replace(tmp, folder)
        except OSError:                                 # another process finished first: keep theirs
            if not os.path.exists(os.path.join(folder, MANIFEST)):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ds.path = folder
    return ds


def load_dataset(folder, spec=None):
    """Load a cache folder, checking the generator version, the spec (if given) and the content hash."""
    try:
        with open(os.path.join(folder, MANIFEST)) as f:
            manifest = json.load(f)
        stored_spec = spec_from_dict(manifest["spec"])
        if manifest.get("generator_version") != generators.GENERATOR_VERSION:
            raise CacheError(f"{folder}: generator version {manifest.get('generator_version')!r} != "
                             f"{generators.GENERATOR_VERSION!r}")
        if spec is not None and stored_spec != spec:
            raise CacheError(f"{folder}: manifest spec differs from the requested spec")
        with np.load(os.path.join(folder, DATA)) as z:
            arrays = {k: z[k].astype(np.int64) for k in z.files}
        names = manifest["splits"]
        extrap = {k: (arrays[f"extrap__{k}__x"], arrays[f"extrap__{k}__y"]) for k in names if k not in
                  ("train", "test")}
        parts = (arrays["trigger_ids"], (arrays["train_x"], arrays["train_y"]), (arrays["test_x"], arrays["test_y"]),
                 extrap)
        if set(arrays) != set(generators.arrays_of(*parts)):
            raise CacheError(f"{folder}: {DATA} holds arrays {sorted(arrays)}, not those the manifest lists")
    except CacheError:
        raise
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, EOFError) as e:
        raise CacheError(f"{folder}: unreadable dataset cache ({type(e).__name__}: {e})") from e
    digest = generators.content_hash(stored_spec, generators.arrays_of(*parts))
    if digest != manifest.get("hash"):
        raise CacheError(f"{folder}: content hash {digest[:12]} != manifest hash {str(manifest.get('hash'))[:12]}"
                         " (corrupt or edited cache)")
    return Dataset.from_parts(stored_spec, *parts, digest, manifest, path=folder)


def load_or_generate(spec, cache_dir=None, *, strict=False, force=False):
    """Cached dataset for `spec` under `cache_dir` ($PELAB_DATA or ./data_cache), generated if missing.

    A corrupt or mismatched cache is regenerated with a warning, or raises `CacheError` if `strict`.
    `force` regenerates unconditionally.
    """
    folder = cache_path(spec, cache_dir)
    if os.path.exists(folder) and not force:
        try:
            return load_dataset(folder, spec)
        except CacheError as e:
            if strict:
                raise
            warnings.warn(f"regenerating dataset cache: {e}", stacklevel=2)
    return save(generators.generate(spec), folder)
