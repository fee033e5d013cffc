"""A BERT sentence encoder in numpy, and a static token table distilled from it.

The encoder is run once per machine over every vocabulary token alone; the pooled outputs,
reduced by PCA, become the table that `StaticEmbedder` averages at query and index time, so
nothing heavier than a table look-up runs while indexing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

DistilProgress = Callable[[int, int], None]
"""Called as (tokens done, tokens to do) while a table is distilled."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BertConfig:
    """The shape of a BERT encoder, as its `config.json` gives it."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> BertConfig:
        """The fields we use from a Hugging Face BERT `config.json`."""
        if data.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {data.get('hidden_act')!r}")
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})  # type: ignore[arg-type]


_LAYER = (
    "attention.self.query",
    "attention.self.key",
    "attention.self.value",
    "attention.output.dense",
    "intermediate.dense",
    "output.dense",
)


class BertEncoder:
    """Token ids to contextual vectors: embeddings, then post-norm self-attention layers."""

    def __init__(self, config: BertConfig, weights: Mapping[str, npt.NDArray[np.generic]]) -> None:
        self.config = config

        def get(name: str) -> F32:
            return np.asarray(weights[name], dtype=np.float32)

        self._word = get("embeddings.word_embeddings.weight")
        self._position = get("embeddings.position_embeddings.weight")
        self._type = get("embeddings.token_type_embeddings.weight")
        self._norm = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        self._layers: list[dict[str, F32]] = []
        for n in range(config.num_hidden_layers):
            prefix = f"encoder.layer.{n}."
            layer: dict[str, F32] = {}
            for part in _LAYER:
                # Stored as (out, in); kept as (in, out) so that a forward step is `x @ w + b`.
                layer[part] = np.ascontiguousarray(get(f"{prefix}{part}.weight").T)
                layer[part + ".b"] = get(f"{prefix}{part}.bias")
            for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
                layer[norm] = get(f"{prefix}{norm}.weight")
                layer[norm + ".b"] = get(f"{prefix}{norm}.bias")
            self._layers.append(layer)

    @classmethod
    def load(cls, model_dir: Path) -> BertEncoder:
        """The encoder in a Hugging Face model folder (`config.json`, `model.safetensors`)."""
        from safetensors.numpy import load_file

        config = BertConfig.from_json(json.loads((model_dir / "config.json").read_text()))
        return cls(config, load_file(str(model_dir / "model.safetensors")))

    def hidden(self, ids: Ids, mask: Mask) -> F32:
        """The last layer's vectors, shape (batch, length, hidden); `mask` marks real tokens."""
        c = self.config
        batch, length = ids.shape
        heads, width = c.num_attention_heads, c.hidden_size // c.num_attention_heads
        x = self._word[ids] + self._position[:length][None] + self._type[0]
        x = _layer_norm(x, *self._norm, c.layer_norm_eps)
        # Padding is never attended to: its keys get a large negative score before the softmax.
        bias = np.where(mask, 0.0, -1e9).astype(np.float32)[:, None, None, :]
        scale = np.float32(1.0 / math.sqrt(width))
        for p in self._layers:

            def split(name: str, x: F32 = x, p: dict[str, F32] = p) -> F32:
                y = _linear(x, p[name], p[name + ".b"])
                return y.reshape(batch, length, heads, width).transpose(0, 2, 1, 3)

            q, k, v = (split(f"attention.self.{n}") for n in ("query", "key", "value"))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context: F32 = (
                (scores @ v)
                .transpose(0, 2, 1, 3)
                .reshape(batch, length, c.hidden_size)
                .astype(np.float32, copy=False)
            )
            attended = _linear(context, p["attention.output.dense"], p["attention.output.dense.b"])
            x = _layer_norm(
                x + attended,
                p["attention.output.LayerNorm"],
                p["attention.output.LayerNorm.b"],
                c.layer_norm_eps,
            )
            inner = _gelu(_linear(x, p["intermediate.dense"], p["intermediate.dense.b"]))
            out = _linear(inner, p["output.dense"], p["output.dense.b"])
            x = _layer_norm(
                x + out, p["output.LayerNorm"], p["output.LayerNorm.b"], c.layer_norm_eps
            )
        return x

    def pooled(self, ids: Ids, mask: Mask) -> F32:
        """The mean of the real tokens' last-layer vectors, shape (batch, hidden)."""
        hidden = self.hidden(ids, mask)
        weights = mask.astype(np.float32)[:, :, None]
        mean: F32 = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return mean


def _linear(x: F32, weight: F32, bias: F32) -> F32:
    """`x @ weight + bias` over the last axis as one 2-D product (3-D matmul skips BLAS)."""
    flat = x.reshape(-1, x.shape[-1]) @ weight
    flat += bias
    out: F32 = flat.reshape(*x.shape[:-1], weight.shape[1])
    return out


def _layer_norm(x: F32, gain: F32, bias: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    out: F32 = (centred / np.sqrt(var + np.float32(eps))) * gain + bias
    return out


def _gelu(x: F32) -> F32:
    """GELU in its tanh form, in place: within 5e-4 of the erf form and five times faster."""
    y = x * x
    y *= np.float32(0.044715)
    y += np.float32(1.0)
    y *= x
    y *= np.float32(math.sqrt(2.0 / math.pi))
    np.tanh(y, out=y)
    y += np.float32(1.0)
    y *= x
    y *= np.float32(0.5)
    return y


def distil(
    encoder: BertEncoder,
    token_ids: Ids,
    *,
    cls_id: int,
    sep_id: int,
    dim: int = 128,
    batch: int = 512,
    progress: DistilProgress | None = None,
) -> F32:
    """A (vocabulary, dim) table: each of `token_ids` as `[CLS] token [SEP]`, encoded,
    mean-pooled and reduced by PCA; rows of other tokens stay zero."""
    todo = len(token_ids)
    pooled = np.zeros((todo, encoder.config.hidden_size), dtype=np.float32)
    mask = np.ones((batch, 3), dtype=bool)
    for start in range(0, todo, batch):
        ids = token_ids[start : start + batch].astype(np.int64)
        triples = np.stack([np.full_like(ids, cls_id), ids, np.full_like(ids, sep_id)], axis=1)
        pooled[start : start + len(ids)] = encoder.pooled(triples, mask[: len(ids)])
        if progress is not None:
            progress(start + len(ids), todo)
    # The sentence model compares by cosine: unit rows first, so PCA keeps directions.
    pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    table = np.zeros((encoder.config.vocab_size, dim), dtype=np.float32)
    table[token_ids] = pca(pooled, dim)
    return table


def pca(x: F32, dim: int) -> F32:
    """`x` centred and projected on its `dim` directions of largest variance."""
    centred = x - x.mean(axis=0)
    covariance = (centred.T @ centred) / max(len(x) - 1, 1)
    values, vectors = np.linalg.eigh(covariance.astype(np.float64))
    order = np.argsort(values)[::-1][:dim]
    basis = vectors[:, order].astype(np.float32)
    # eigh's signs are arbitrary; fixing them keeps tables from two runs comparable.
    basis *= np.sign(basis[np.abs(basis).argmax(axis=0), np.arange(basis.shape[1])])
    reduced: F32 = (centred @ basis).astype(np.float32)
    return reduced
