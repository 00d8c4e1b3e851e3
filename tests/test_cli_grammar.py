"""One CLI grammar (issue 24): `--json` on every command that prints a result, `--model-dir` for a local model
folder everywhere, every option described, an unknown command lists the commands, memory in GiB."""

from __future__ import annotations

import argparse
import json

import pytest

from conftest import run_cli
from wizard.cli.app import COMMANDS, main


class _Parsed(BaseException):
    """Raised instead of parsing: carries the parser a command built (not an Exception: main() catches those)."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _parsers(monkeypatch, argv: list[str]) -> list[argparse.ArgumentParser]:
    """The parser `verl-init ARGV` builds, and the parsers of its subparsers."""
    def capture(self, *args, **kwargs):
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    with pytest.raises(_Parsed) as got:
        main(argv)
    found = [got.value.parser]
    for action in got.value.parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found += list(action.choices.values())
    return found


# every command line that builds its own parser: the render (no command word), each command, and check's two modes
COMMAND_LINES = [[], *([w] for w in sorted(COMMANDS)), ["check", "--mode", "cluster"]]


def _undescribed(parser: argparse.ArgumentParser) -> list[str]:
    return ["/".join(a.option_strings) or a.dest for a in parser._actions
            if not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS and not (a.help or "").strip()]


@pytest.mark.parametrize("argv", COMMAND_LINES, ids=lambda a: " ".join(a) or "render")
def test_every_option_has_help_text(argv, monkeypatch):
    parsers = _parsers(monkeypatch, argv + ["--profile", "x"] if argv == [] else argv)
    assert parsers and parsers[0].prog.startswith("verl-init")
    missing = {p.prog: _undescribed(p) for p in parsers if _undescribed(p)}
    assert not missing, missing


def test_the_help_check_sees_an_undescribed_option():
    """Negative control: an option without help is reported."""
    p = argparse.ArgumentParser(prog="verl-init x")
    p.add_argument("--described", help="something")
    p.add_argument("--bare")
    p.add_argument("--hidden", help=argparse.SUPPRESS)
    assert _undescribed(p) == ["--bare"]


@pytest.mark.parametrize("word", ["chek", "foo"])
def test_an_unknown_command_lists_the_commands(word, capsys):
    assert main([word, "--profile", "single-gpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"unknown command {word!r}" in err
    assert all(c in err for c in COMMANDS)
    assert ("did you mean 'check'?" in err) == (word == "chek")


@pytest.mark.parametrize("word", ["profiles", "keys", "rules"])
def test_listing_commands_print_json(word, capsys):
    assert main([word, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and len(rows) > 5
    first = {"profiles": {"name", "description"}, "keys": {"key", "description", "allowed", "default"},
             "rules": {"id", "area", "title"}}[word]
    assert all(set(r) == first for r in rows)
    if word == "rules":
        assert main(["rules", "VI201", "--json"]) == 0
        assert [r["id"] for r in json.loads(capsys.readouterr().out)] == ["VI201"]


def test_the_render_prints_its_summary_as_json(tmp_path, cli_env):
    out = tmp_path / "b"
    r = run_cli(["--profile", "single-gpu", "--out", str(out), "--json"], env=cli_env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # nothing but the JSON on stdout
    assert doc["written"] is True and doc["out"] == str(out) and (out / "PLAN.md").is_file()
    assert doc["memory"]["verdict"] in ("fits", "tight") and doc["memory"]["peak_gib"] > 0
    assert doc["batch"]["samples_per_step"] == doc["batch"]["prompts_per_step"] * doc["batch"]["samples_per_prompt"]
    assert doc["next"] and doc["details"].endswith("PLAN.md")
    dry = run_cli(["--profile", "single-gpu", "--out", str(tmp_path / "c"), "--json", "--dry-run"], env=cli_env,
                  cwd=tmp_path)
    doc = json.loads(dry.stdout)
    assert dry.returncode == 0 and doc["written"] is False and "verl_config.yaml" in doc["files"]
    assert not (tmp_path / "c").exists()


def test_render_json_refuses_what_it_cannot_print(tmp_path, cli_env):
    r = run_cli(["--profile", "single-gpu", "--out", str(tmp_path / "b"), "--json", "--verify"], env=cli_env,
                cwd=tmp_path)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "b").exists()


@pytest.mark.parametrize("argv", [["plan"], ["verify"], ["check"], ["check", "--mode", "cluster"], ["doctor"],
                                  ["smoke"], ["validate-dataset"], ["profiles"], ["keys"], ["rules"], []],
                         ids=lambda a: " ".join(a) or "render")
def test_every_command_that_prints_a_result_has_json(argv, monkeypatch):
    options = {o for p in _parsers(monkeypatch, argv) for a in p._actions for o in a.option_strings}
    assert "--json" in options


def test_validate_dataset_takes_model_dir_and_still_tokenizer(tmp_path, capsys):
    """--model-dir names the model folder whose tokenizer reads the prompts (as in verify and smoke); --tokenizer,
    the old name, still works."""
    import contextlib
    import io

    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        main(["validate-dataset", "--help"])
    assert "--model-dir" in help_text.getvalue() and "--tokenizer" not in help_text.getvalue()
    missing = tmp_path / "no-such-model"
    for flag in ("--model-dir", "--tokenizer"):
        rows = tmp_path / "rows.jsonl"
        rows.write_text(json.dumps({"prompt": [{"role": "user", "content": "1+1?"}], "data_source": "x",
                                    "reward_model": {"ground_truth": "2"}, "extra_info": {}}) + "\n")
        code = main(["validate-dataset", str(rows), flag, str(missing)])
        captured = capsys.readouterr()
        assert code != 0 and str(missing) in captured.out + captured.err, (flag, captured)


def _gb_quantities(text: str, card_gb: float) -> list[str]:
    """Every "N GB" in `text` that is not the card's nominal size (an answer given in GB) or host memory (compared
    with host_memory_gb, also given in GB): what verl-init estimated and should print in GiB."""
    import re

    found = []
    for line in text.splitlines():
        if "Host memory per node" in line:
            line = line.split("Host memory per node")[0]
        found += [m.group(0) for m in re.finditer(r"(\d+(?:\.\d+)?) GB\b", line) if float(m.group(1)) != card_gb]
    return found


@pytest.mark.parametrize("profile", ["single-gpu", "ppo-16gpu", "qwen3-30b-a3b-moe-8gpu"])
def test_estimated_memory_is_printed_in_gib(profile, tmp_path):
    import wizard
    from wizard.intent.profiles import merge_answers

    p = wizard.plan(merge_answers(profile, None, [], []), base_dir=str(tmp_path))
    files = wizard.render(p)
    assert _gb_quantities(files["PLAN.md"], p.answers.gpu_memory_gb) == []
    assert "GiB per GPU" in files["PLAN.md"]  # the rollout reason's weights, estimated


def test_the_gib_check_sees_a_gb_estimate():
    """Negative control: an estimate in GB is reported; the card's size and host memory are not."""
    text = "0.6 × 80 GB for the engine (5.7 GB actor)\nHost memory per node for offloaded state: ~62 GB."
    assert _gb_quantities(text, 80.0) == ["5.7 GB"]
