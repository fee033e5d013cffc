import json
from pathlib import Path

import pytest

from kestrel.models.scripted import (
    ScriptedProvider,
    ScriptExhausted,
    call,
    parse_script,
    say,
)
from kestrel.protocol.errors import ConfigError, ProviderError
from kestrel.protocol.messages import (
    AssistantTurn,
    Completion,
    ModelRequest,
    TextDelta,
    ToolCallDelta,
    ToolResultTurn,
    UserTurn,
)


async def collect(provider: ScriptedProvider, request: ModelRequest) -> list[object]:
    return [part async for part in provider.stream(request)]


async def test_turn_is_chosen_by_assistant_turns_so_far() -> None:
    provider = ScriptedProvider([call("read_file", "looking", path="a.py"), say("done")])
    first = await collect(provider, ModelRequest(system="s", messages=(UserTurn(text="go"),)))
    completion = first[-1]
    assert isinstance(completion, Completion)
    assert completion.message.text == "looking"
    (tool_call,) = completion.message.tool_calls
    assert (tool_call.id, tool_call.name, json.loads(tool_call.arguments)) == (
        "call_0_0",
        "read_file",
        {"path": "a.py"},
    )
    assert completion.stop_reason == "tool_use"
    assert "".join(p.text for p in first if isinstance(p, TextDelta)) == "looking"
    deltas = [p for p in first if isinstance(p, ToolCallDelta)]
    assert "".join(d.arguments_delta for d in deltas) == tool_call.arguments

    history = (
        UserTurn(text="go"),
        completion.message,
        ToolResultTurn(call_id="call_0_0", name="read_file", content="x"),
    )
    second = await collect(provider, ModelRequest(system="s", messages=history))
    assert isinstance(second[-1], Completion) and second[-1].message.text == "done"

    later = (*history, AssistantTurn(text="done"), UserTurn(text="more?"))
    with pytest.raises(ScriptExhausted) as ran_out:
        await collect(provider, ModelRequest(system="s", messages=later))
    expected = "the scripted model has no more replies (the script has 2 replies)"
    assert str(ran_out.value) == expected


async def test_a_script_file_that_runs_out_names_itself(tmp_path: Path) -> None:
    script = tmp_path / "one.json"
    script.write_text('[{"text": "only this"}]')
    provider = ScriptedProvider.from_file(script)
    done = (UserTurn(text="go"), AssistantTurn(text="only this"), UserTurn(text="and?"))
    with pytest.raises(ScriptExhausted, match=r"^the scripted model has no more replies") as err:
        await collect(provider, ModelRequest(system="s", messages=done))
    assert str(err.value).endswith(f"(script {script} has 1 reply)")
    assert isinstance(err.value, ProviderError) and not err.value.retryable


async def test_usage_override_and_estimate() -> None:
    turns = [{"text": "hi", "usage": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 0.25}}]
    provider = ScriptedProvider(parse_script(turns))
    parts = await collect(provider, ModelRequest(system="x" * 400, messages=()))
    usage = parts[-1].usage  # type: ignore[attr-defined]
    assert (usage.input_tokens, usage.output_tokens, usage.cost_usd) == (10, 5, 0.25)
    estimated = ScriptedProvider([say("abcd" * 10)])
    parts = await collect(estimated, ModelRequest(system="x" * 400, messages=()))
    assert parts[-1].usage.input_tokens == 100  # type: ignore[attr-defined]
    assert parts[-1].usage.output_tokens == 10  # type: ignore[attr-defined]


def test_raw_string_arguments_are_kept_verbatim() -> None:
    (turn,) = parse_script([{"tool_calls": [{"name": "bash", "arguments": "{broken"}]}])
    assert turn.tool_calls == (("bash", "{broken"),)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{}", "must be a JSON list"),
        ('[{"txt": "typo"}]', "turn 0: unknown key(s) ['txt']"),
        ('[{"tool_calls": [{"arguments": {}}]}]', "turn 0: tool_calls[0]: a tool call needs"),
        ('[{"text": 3}]', "'text' must be a string"),
        ('[{"delay_s": -1}]', "'delay_s' must be a non-negative number"),
        ("[", "line 1: not valid JSON"),
    ],
)
def test_malformed_scripts_name_file_and_turn(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "script.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        ScriptedProvider.from_file(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_missing_script_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        ScriptedProvider.from_file(tmp_path / "nope.json")
