"""The context window must hold the reply and a prompt: checked over the merged settings, from
every layer, with the numbers in the message."""

from __future__ import annotations

from pathlib import Path

import pytest

from kestrel.protocol.errors import ConfigError
from kestrel.settings import Settings
from kestrel.settings_checks import PROMPT_FLOOR_TOKENS
from kestrel.settings_load import ENV_VARS, load_settings

SMALL_WINDOW = (
    "compaction.window_tokens (4,096) must be larger than max_output_tokens (8,192) plus 4,000 "
    "tokens for the prompt; lower max_output_tokens or raise the window"
)


def load(tmp_path: Path, env: dict[str, str] | None = None, **flags: object) -> Settings:
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True, exist_ok=True)
    return load_settings(tmp_path, env=env or {}, flags=flags, home=home)


def user_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "home" / ".config" / "kestrel" / "settings.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_a_window_smaller_than_the_reply_is_refused_with_its_numbers(tmp_path: Path) -> None:
    user_file(tmp_path, "[compaction]\nwindow_tokens = 4096\n")
    with pytest.raises(ConfigError) as caught:
        load(tmp_path)
    assert str(caught.value) == f"combined settings: {SMALL_WINDOW}"


def test_the_window_variable_sets_the_window(tmp_path: Path) -> None:
    assert ENV_VARS["KESTREL_WINDOW_TOKENS"] == ("compaction", "window_tokens")
    assert load(tmp_path, {"KESTREL_WINDOW_TOKENS": "32768"}).compaction.window_tokens == 32_768
    with pytest.raises(ConfigError, match=r"window_tokens \(4,096\) must be larger"):
        load(tmp_path, {"KESTREL_WINDOW_TOKENS": "4096"})


def test_the_output_cap_is_checked_against_the_window_too(tmp_path: Path) -> None:
    env = {"KESTREL_WINDOW_TOKENS": "16384", "KESTREL_MAX_OUTPUT_TOKENS": "16384"}
    with pytest.raises(ConfigError, match=r"max_output_tokens \(16,384\) plus 4,000"):
        load(tmp_path, env)
    # A lower cap from a higher layer (a flag) fixes what the variables got wrong.
    fixed = load(tmp_path, env, max_output_tokens=4096)
    assert (fixed.compaction.window_tokens, fixed.max_output_tokens) == (16_384, 4_096)


def test_the_boundary_is_strictly_larger(tmp_path: Path) -> None:
    exact = str(8192 + PROMPT_FLOOR_TOKENS)
    with pytest.raises(ConfigError, match="must be larger"):
        load(tmp_path, {"KESTREL_WINDOW_TOKENS": exact})
    above = load(tmp_path, {"KESTREL_WINDOW_TOKENS": str(8192 + PROMPT_FLOOR_TOKENS + 1)})
    assert above.compaction.window_tokens == 12_193


def test_a_lower_layer_may_be_fixed_by_a_higher_one(tmp_path: Path) -> None:
    user_file(tmp_path, "max_output_tokens = 2048\n[compaction]\nwindow_tokens = 8192\n")
    assert load(tmp_path).compaction.window_tokens == 8192
    # The window alone is fine in the file; the flag that raises the cap is what breaks it.
    with pytest.raises(ConfigError, match=r"window_tokens \(8,192\).*max_output_tokens \(8,192\)"):
        load(tmp_path, max_output_tokens=8192)


def test_the_defaults_agree() -> None:
    settings = Settings()
    assert settings.compaction.window_tokens > settings.max_output_tokens + PROMPT_FLOOR_TOKENS
