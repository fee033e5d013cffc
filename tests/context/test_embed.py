"""The numpy BERT encoder, distillation, the static embedder and its cached table."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

from kestrel.context.distil import BertConfig, BertEncoder, distil, pca
from kestrel.context.embed import default_embedder, load_static, static_name, weights_dir
from kestrel.context.static import StaticEmbedder, sif_weights

CONFIG = {
    "vocab_size": 40,
    "hidden_size": 16,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 32,
    "max_position_embeddings": 12,
    "type_vocab_size": 2,
    "layer_norm_eps": 1e-12,
    "hidden_act": "gelu",
}
WORDS = [
    "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "e", "s",
    "get", "user", "name", "cart", "total", "price", "ship", "##ping", "cost", "tax",
    "http", "request", "parse", "header", "##s", "order", "line", "item",
]  # fmt: skip


def random_weights(config: dict[str, int | float | str], seed: int = 0) -> dict[str, np.ndarray]:
    """A BERT checkpoint of the given shape, named as Hugging Face names its tensors."""
    rng = np.random.default_rng(seed)
    h, inner = int(config["hidden_size"]), int(config["intermediate_size"])

    def w(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    weights = {
        "embeddings.word_embeddings.weight": w(int(config["vocab_size"]), h),
        "embeddings.position_embeddings.weight": w(int(config["max_position_embeddings"]), h),
        "embeddings.token_type_embeddings.weight": w(int(config["type_vocab_size"]), h),
        "embeddings.LayerNorm.weight": 1 + w(h),
        "embeddings.LayerNorm.bias": w(h),
    }
    shapes = {
        "attention.self.query": (h, h),
        "attention.self.key": (h, h),
        "attention.self.value": (h, h),
        "attention.output.dense": (h, h),
        "intermediate.dense": (inner, h),
        "output.dense": (h, inner),
    }
    for n in range(int(config["num_hidden_layers"])):
        for part, (out, into) in shapes.items():
            weights[f"encoder.layer.{n}.{part}.weight"] = w(out, into)
            weights[f"encoder.layer.{n}.{part}.bias"] = w(out)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            weights[f"encoder.layer.{n}.{norm}.weight"] = 1 + w(h)
            weights[f"encoder.layer.{n}.{norm}.bias"] = w(h)
    return weights


def tiny_tokenizer() -> Tokenizer:
    """A lowercasing WordPiece tokenizer over WORDS, built like BERT's."""
    tokenizer = Tokenizer(models.WordPiece({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


@pytest.fixture
def encoder() -> BertEncoder:
    return BertEncoder(BertConfig.from_json(CONFIG), random_weights(CONFIG))


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A model folder laid out like the weights package's, holding the tiny model."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(CONFIG))
    save_file(random_weights(CONFIG), str(folder / "model.safetensors"))
    tiny_tokenizer().save(str(folder / "tokenizer.json"))
    return folder


# ----------------------------------------------------------------------------- encoder


def test_encoder_shapes_and_determinism(encoder: BertEncoder) -> None:
    ids = np.array([[2, 8, 9, 3], [2, 11, 3, 0]])
    mask = ids != 0
    hidden = encoder.hidden(ids, mask)
    assert hidden.shape == (2, 4, 16) and hidden.dtype == np.float32
    pooled = encoder.pooled(ids, mask)
    assert pooled.shape == (2, 16)
    assert np.array_equal(pooled, encoder.pooled(ids, mask))
    assert np.isfinite(hidden).all()
    assert not np.allclose(pooled[0], pooled[1])


def test_padding_changes_nothing(encoder: BertEncoder) -> None:
    alone = encoder.pooled(np.array([[2, 12, 13, 3]]), np.ones((1, 4), dtype=bool))
    ids = np.array([[2, 12, 13, 3, 0, 0, 0], [2, 8, 9, 10, 17, 20, 3]])
    padded = encoder.pooled(ids, ids != 0)
    assert np.allclose(padded[0], alone[0], atol=1e-5)
    # And the first row in the batch did not leak into the second.
    other = encoder.pooled(ids[1:], ids[1:] != 0)
    assert np.allclose(padded[1], other[0], atol=1e-5)


def test_config_refuses_another_activation() -> None:
    with pytest.raises(ValueError, match="activation"):
        BertConfig.from_json({**CONFIG, "hidden_act": "relu"})


def test_distil_encodes_the_chosen_tokens_only(encoder: BertEncoder) -> None:
    chosen = np.arange(5, 30)
    calls: list[tuple[int, int]] = []
    table = distil(
        encoder, chosen, cls_id=2, sep_id=3, dim=6, batch=8, progress=lambda *a: calls.append(a)
    )
    assert table.shape == (40, 6) and table.dtype == np.float32
    assert not table[:5].any() and not table[30:].any()
    assert np.abs(table[chosen]).sum(axis=1).min() > 0
    assert calls[-1] == (25, 25) and len(calls) == 4
    # Batching changes only the rounding of the matrix products.
    again = distil(encoder, chosen, cls_id=2, sep_id=3, dim=6, batch=5)
    assert np.allclose(table, again, atol=1e-5)


def test_pca_orders_directions_by_variance() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((500, 5)).astype(np.float32) * np.array([5, 1, 3, 0.1, 2])
    reduced = pca(x, 3)
    assert reduced.shape == (500, 3)
    spread = reduced.var(axis=0)
    assert spread[0] > spread[1] > spread[2]
    assert np.allclose(spread, [25, 9, 4], rtol=0.2)


# ----------------------------------------------------------------------------- static embedder


def static(seed: int = 3) -> StaticEmbedder:
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((len(WORDS), 8)).astype(np.float32)
    weights = sif_weights({w: i for i, w in enumerate(WORDS)}, len(WORDS))
    return StaticEmbedder(table, weights, tiny_tokenizer(), name="tiny-1")


def test_static_rows_are_unit_vectors_and_empty_text_is_zero() -> None:
    embedder = static()
    vectors = embedder.embed(["cart total price", "", "the of and self return", "shipping cost"])
    assert vectors.shape == (4, 8) and vectors.dtype == np.float32
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms[[0, 3]], 1.0, atol=1e-6)
    # Empty text, and text made only of stopwords and syntax, embed as zero rows.
    assert norms[1] == 0 and norms[2] == 0
    assert embedder.embed([]).shape == (0, 8)


def test_code_identifiers_are_split_into_their_words() -> None:
    embedder = static()
    spaced, camel, snake, upper = embedder.embed(
        ["get user name", "getUserName", "get_user_name", "GET_USER_NAME"]
    )
    assert np.allclose(camel, spaced, atol=1e-6)
    assert np.allclose(snake, spaced, atol=1e-6)
    assert np.allclose(upper, spaced, atol=1e-6)
    # Parts are cut into word pieces: "shipping" is "ship ##ping".
    assert embedder.embed(["shipping"])[0].any()


def test_a_text_embeds_the_same_alone_or_in_a_batch() -> None:
    embedder = static()
    texts = ["parse http request headers", "order line item", "tax"]
    together = embedder.embed(texts)
    fresh = static()
    for n, text in enumerate(texts):
        assert np.allclose(fresh.embed([text])[0], together[n], atol=1e-6)


def test_repeated_words_count_less_than_linearly() -> None:
    embedder = static()
    once, many, other = embedder.embed(["cart tax", "cart cart cart cart cart cart tax", "cart"])
    # Six carts pull the vector towards "cart", but not six times as hard.
    assert float(many @ other) > float(once @ other)
    assert float(many @ embedder.embed(["tax"])[0]) > 0.1 * float(once @ embedder.embed(["tax"])[0])


def test_sif_weights_damp_frequent_tokens_and_drop_special_ones() -> None:
    weights = sif_weights({w: i for i, w in enumerate(WORDS)}, len(WORDS))
    vocab = {w: i for i, w in enumerate(WORDS)}
    assert weights[vocab["[CLS]"]] == 0 and weights[vocab["[PAD]"]] == 0
    # Single characters count as the most frequent; later tokens weigh more.
    assert weights[vocab["a"]] < weights[vocab["get"]] < weights[vocab["item"]] <= 1


# ----------------------------------------------------------------------------- the cached table


def test_the_table_is_distilled_once_then_read_from_the_cache(
    model_dir: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    first = load_static(model_dir, cache, dim=8)
    stored = list((cache / "embedders").iterdir())
    assert [p.name for p in stored] == [f"{first.name}.npz"]
    text = ["get the cart total price"]
    # Without the model's weights the cached table still serves: nothing is distilled again.
    (model_dir / "model.safetensors").unlink()
    again = load_static(model_dir, cache, dim=8)
    assert again.name == first.name
    assert np.array_equal(again.embed(text), first.embed(text))


def test_a_damaged_table_is_distilled_again(model_dir: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = load_static(model_dir, cache, dim=8)
    path = cache / "embedders" / f"{first.name}.npz"
    path.write_bytes(b"not a table")
    again = load_static(model_dir, cache, dim=8)
    assert np.array_equal(again.embed(["order item"]), first.embed(["order item"]))
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_embedder_switched_off_or_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert default_embedder(tmp_path, env={}) is None  # off unless asked for
    assert default_embedder(tmp_path, env={"KESTREL_EMBEDDER": "none"}) is None
    assert default_embedder(tmp_path, env={"KESTREL_EMBEDDER": "off"}) is None
    assert default_embedder(tmp_path, env={"KESTREL_EMBEDDER": "bert"}) is None
    assert "unknown KESTREL_EMBEDDER 'bert'" in capsys.readouterr().err
    assert weights_dir("no_such_weights_package") is None
    assert not (tmp_path / "embedders").exists()


# ----------------------------------------------------------------------------- the real model

REAL = weights_dir()


@pytest.mark.skipif(REAL is None, reason="the embedding model's weights are not installed")
def test_real_weights_encode_sentences_by_meaning() -> None:
    assert REAL is not None
    encoder = BertEncoder.load(REAL)
    tokenizer = Tokenizer.from_file(str(REAL / "tokenizer.json"))
    tokenizer.enable_padding()
    sentences = [
        "A man is eating food.",
        "A man is eating a piece of bread.",
        "A man is riding a horse.",
    ]
    encoded = tokenizer.encode_batch(sentences)
    ids = np.array([e.ids for e in encoded])
    vectors = encoder.pooled(ids, np.array([e.attention_mask for e in encoded], dtype=bool))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    similar, unlike = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    # The published model puts these two at about 0.76 and 0.25.
    assert similar == pytest.approx(0.755, abs=0.02)
    assert unlike < 0.4


@pytest.mark.skipif(REAL is None, reason="the embedding model's weights are not installed")
def test_real_weights_distil_a_truncated_vocabulary(tmp_path: Path) -> None:
    assert REAL is not None
    embedder = load_static(REAL, tmp_path, vocab_limit=2200)
    assert embedder.name == static_name(2200) and embedder.dim == 128
    house, home, war, music, king = embedder.embed(["house", "home", "war", "music", "king"])
    assert float(house @ home) > 0.7
    assert float(house @ home) > max(float(house @ war), float(house @ music)) + 0.2
    # Tokens past the limit were never distilled: they count for nothing.
    assert not king.any()
    assert (tmp_path / "embedders" / f"{embedder.name}.npz").is_file()
