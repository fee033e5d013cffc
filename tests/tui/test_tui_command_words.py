"""The pure parts of the person's commands: `@` candidates, `/memory add`'s words, and how
`/init` adds its layout section to an AGENTS.md."""

from __future__ import annotations

import pytest

from kestrel.memory_store import MemoryEntryError
from kestrel.tui.init_cmd import HEADING, MARKER, merged, starting_text
from kestrel.tui.memory_cmd import Addition, parse_add
from kestrel.tui.mentions import SymbolName, candidates, complete_mention

FILES = ["src/calc.py", "lib/calc.rs", "README.md"]
SYMBOLS = [
    SymbolName("add", "add", "function", "src/calc.py", 1),
    SymbolName("Adder", "Adder", "class", "lib/calc.rs", 3),
    SymbolName("total", "Adder.total", "method", "lib/calc.rs", 5),
]


def test_a_definition_completes_to_its_file_and_dotted_name() -> None:
    assert complete_mention("see @tot", FILES, SYMBOLS) == "see @lib/calc.rs:Adder.total "
    assert complete_mention("see @Adder.t", FILES, SYMBOLS) == "see @lib/calc.rs:Adder.total "
    assert complete_mention("see @ad", FILES, SYMBOLS) == "see @src/calc.py:add "
    # Two candidates: what was typed stays, and Tab goes through them instead.
    assert complete_mention("see @Ad", FILES, SYMBOLS) is None
    texts = [c.text for c in candidates("Ad", FILES, SYMBOLS)]
    assert texts == ["lib/calc.rs:Adder", "lib/calc.rs:Adder.total"]
    # Case counts only when nothing matches with it.
    texts = [c.text for c in candidates("ADD", FILES, SYMBOLS)]
    assert texts == ["src/calc.py:add", "lib/calc.rs:Adder"]


def test_files_by_name_never_lose_what_was_typed() -> None:
    assert complete_mention("@cal", FILES) is None  # src/calc.py or lib/calc.rs
    assert [c.text for c in candidates("cal", FILES)] == ["src/calc.py", "lib/calc.rs"]
    assert complete_mention("@READ", FILES, SYMBOLS) == "@README.md "


def test_memory_add_takes_the_cli_s_scopes() -> None:
    assert parse_add("Use httpx.") == Addition("project", "Use httpx.")
    assert parse_add("--user Prefer pathlib.") == Addition("user", "Prefer pathlib.")
    assert parse_add("--scope user Prefer pathlib.") == Addition("user", "Prefer pathlib.")
    assert parse_add("-s project Tabs.") == Addition("project", "Tabs.")
    with pytest.raises(MemoryEntryError, match="the scope is project"):
        parse_add("--scope team Tabs.")
    with pytest.raises(MemoryEntryError, match="unknown option --global"):
        parse_add("--global Tabs.")


def test_init_adds_its_section_once_and_replaces_only_its_own() -> None:
    section = f"{HEADING}\n\n{MARKER}\nmap one\n\n```text\n## not a heading\n```\n"
    newer = section.replace("map one", "map two")
    ours = "# Ours\n\nKeep this.\n\n## Testing\n\nRun make test.\n"
    added = merged(ours, section)
    assert added == f"{ours}\n{section}"
    assert merged(added, section) == added
    replaced = merged(added + "\n## Later\n\nStays.\n", newer)
    assert replaced == f"{ours}\n{newer}\n## Later\n\nStays.\n"
    assert merged("", section) == section
    assert starting_text(section).startswith("# AGENTS.md\n")
    assert starting_text(section).endswith(section)
