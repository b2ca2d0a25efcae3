"""Engine lists from flags and YAML files: every bad input names the flag or file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from replay.client.config import ConfigError, engines_from_flags, load_config_file


def test_endpoints_name_their_engines_and_kinds() -> None:
    specs = engines_from_flags("vllm,mine", ["vllm=http://a:8000", "mine=sglang@http://b:30000"])
    assert [(s.name, s.kind, s.url) for s in specs] == [
        ("vllm", "vllm", "http://a:8000"),
        ("mine", "sglang", "http://b:30000"),
    ]


def test_no_endpoints_means_emulators_for_the_named_engines() -> None:
    specs = engines_from_flags("flashstate,vllm", [])
    assert [s.url for s in specs] == [None, None]
    assert [s.name for s in engines_from_flags(None, [])] == ["flashstate", "vllm", "sglang"]


@pytest.mark.parametrize(
    ("engines", "endpoints", "message"),
    [
        (None, ["vllm"], "--endpoint 'vllm': expected NAME=URL"),
        (None, ["vllm=ftp://x"], "URL must start with http://"),
        ("vllm", ["sglang=http://x"], "--endpoint names sglang not in --engines vllm"),
        ("mine", [], "'mine' is not an engine kind"),
        ("vllm,sglang", ["vllm=http://x"], "sglang have no --endpoint"),
        (None, ["x=tgi@http://h"], "unknown kind 'tgi'"),
        # Checked here, not left to preflight (`replay.address`, the one URL check).
        (None, ["vllm=http://"], "--endpoint 'vllm=http://': URL: the URL has no host"),
        (None, ["vllm=http://h:99999"], "URL: port 99999: must be between 1 and 65535"),
        (None, ["vllm=http://a:1,http://b:0"], "replica URL 'http://b:0': port 0: must be"),
    ],
)
def test_bad_flags_say_what_to_do(engines: str | None, endpoints: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        engines_from_flags(engines, endpoints)


def test_config_file_with_gpus_and_settings(tmp_path: Path) -> None:
    p = tmp_path / "engines.yaml"
    p.write_text(
        "engines:\n"
        "  - {name: flashstate, url: 'http://a:1', gpus: 2, gpu_type: B200}\n"
        "  - {name: base, kind: vllm, url: 'http://b:1', model: glm}\n"
        "sessions: 12\nwindow: 5-10\n"
    )
    cfg = load_config_file(p)
    assert cfg.engines[0].kind == "flashstate" and cfg.engines[0].gpus == 2
    assert cfg.engines[1].model == "glm" and cfg.sessions == 12 and cfg.window == "5-10"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("engines: []\n", "field 'engines': list at least one engine"),
        ("engines:\n  - {url: 'http://a'}\n", r"engines\[0\]: field 'name' is required"),
        ("engines:\n  - {name: a, kind: vllm, gpus: 0}\n", "field 'engines.0.gpus'"),
        ("engines:\n  - {name: a, kind: vllm, colour: red}\n", "field 'engines.0.colour'"),
        ("engines:\n  - {name: a, kind: tgi}\n", "unknown kind 'tgi'"),
        ("engines:\n  - {name: a}\n  - {name: a}\n", "duplicate engine names"),
        ("- 1\n", "expected a mapping"),
        ("engines: [\n", "not valid YAML"),
        (
            "engines:\n  - {name: a, kind: vllm, url: 'http://h:70000'}\n",
            r"engines\[0\]: field 'url': port 70000: must be between 1 and 65535",
        ),
        (
            "engines:\n  - {name: a, kind: vllm, urls: ['http://h:1', 'ftp://h']}\n",
            r"engines\[0\]: field 'urls\[1\]': only http:// or https:// URLs",
        ),
        # PyYAML keeps a repeated key's last value silently: the file says which line.
        (
            "sessions: 2\nengines:\n  - {name: a, kind: vllm}\nsessions: 3\n",
            r"not valid YAML at line 4, column 1 \(key 'sessions' given twice \(first on line 1\)",
        ),
    ],
)
def test_bad_config_files_name_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match=message) as e:
        load_config_file(p)
    assert str(p) in str(e.value)


def test_missing_config_file() -> None:
    with pytest.raises(ConfigError, match="file not found"):
        load_config_file(Path("/nonexistent/engines.yaml"))


@pytest.mark.parametrize(
    ("engines", "endpoints", "config_name", "message"),
    [
        (None, [" =vllm@http://h:1"], "''", "an engine name must not be empty"),
        (
            None,
            ["a\nb=vllm@http://h:1"],
            '"a\\nb"',
            r"engine name 'a\\nb' holds the control "
            r"character '\\n'",
        ),
        ("vllm,\x1b[31m", [], '"\\e[31m"', r"holds the control character '\\x1b'"),
        ("vllm,a\tb", [], '"a\\tb"', r"holds the control character '\\t'"),
    ],
)
def test_an_empty_or_control_character_engine_name_is_refused(
    tmp_path: Path, engines: str | None, endpoints: list[str], config_name: str, message: str
) -> None:
    """Issue 36: an engine named '' or holding a newline was accepted and broke the tables;
    it is refused where engine names are parsed, from flags and from a config file."""
    with pytest.raises(ConfigError, match=message) as e:
        engines_from_flags(engines, endpoints)
    assert str(e.value).startswith(("--endpoint", "--engines"))
    p = tmp_path / "bad.yaml"
    p.write_text(f"engines:\n  - {{name: {config_name}, kind: vllm, url: 'http://h:1'}}\n")
    with pytest.raises(ConfigError, match=rf"field 'engines.0.name': .*{message}"):
        load_config_file(p)


def test_a_config_files_other_keys_are_the_settings_its_reader_names(tmp_path: Path) -> None:
    """The run spec names the settings a file may give (`replay.runspec.live` passes its
    workload fields); the client's loader knows only the engines and the SLO."""
    p = tmp_path / "c.yaml"
    p.write_text("engines:\n  - {name: vllm, url: 'http://a:1'}\nsessions: 3\ncolour: red\n")
    with pytest.raises(
        ConfigError,
        match=r"field 'colour': not a setting \(known: engines, slo, sessions, window\)",
    ):
        load_config_file(p, ["sessions", "window"])
    assert load_config_file(p).workload() == {"sessions": 3, "colour": "red"}
    p.write_text("engines:\n  - {name: vllm, url: 'http://a:1'}\nsessions: 3\n")
    assert load_config_file(p, ["sessions"]).workload() == {"sessions": 3}
