"""`pip install .` installs what the documented commands import (issue: validate-dataset died on numpy,
prepare_data.py on pyarrow, local model folders on transformers). Every third-party module the package
imports is a declared dependency, or an optional one whose command says what to install before doing
anything (verl, ray, torch, transformers, ...: the verl extra, the tokenizer extra)."""

from __future__ import annotations

import ast
import sys
import tomllib

from conftest import ROOT

# Imported only by commands that need verl's stack (verify, smoke, --verl, cluster probes) or by
# validate-dataset --tokenizer; each says which extra to install when it is missing.
OPTIONAL = {"verl", "ray", "torch", "transformers", "tokenizers", "tensordict", "hydra", "omegaconf", "datasets",
            "amdsmi", "codetiming",
            "PIL",  # validate-dataset's image check: decodes with Pillow when present, else checks the file signature
            "peft",  # the cpu smoke of a LoRA bundle (verify/smoke need verl's stack, which brings peft)
            "huggingface_hub",  # check's read of the local model cache (transformers brings it; without it: not read)
            "pydantic_core"}  # (pydantic_core: installed by pydantic itself)
IMPORT_NAME = {"nvidia-ml-py": "pynvml", "pyyaml": "yaml", "jinja2": "jinja2"}


def _declared() -> set[str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = set()
    for req in meta["dependencies"]:
        name = req.split(";")[0].split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower()
        names.add(IMPORT_NAME.get(name, name.replace("-", "_")))
    return names


def _imported() -> set[str]:
    found = set()
    for path in (ROOT / "wizard").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "wizard"}


def test_every_imported_module_is_declared_or_optional():
    missing = _imported() - _declared() - OPTIONAL
    assert not missing, f"declare these in pyproject.toml [project.dependencies]: {sorted(missing)}"


def test_numpy_and_pyarrow_are_plain_dependencies():
    assert {"numpy", "pyarrow"} <= _declared()


def test_tokenizer_without_transformers_says_which_extra(monkeypatch):
    import importlib.util

    import pytest

    from wizard.env.datasets import load_tokenizer
    from wizard.intent.errors import UserError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a))
    with pytest.raises(UserError, match=r"verl-init\[tokenizer\]"):
        load_tokenizer("/nonexistent")


def test_a_local_model_folder_is_read_without_transformers_and_agrees_with_it(tiny_model):
    """The JSON reading gives the shape transformers' AutoConfig gives (the independent reader)."""
    import transformers

    from wizard.planner.shapes import from_local

    shape = from_local(str(tiny_model))
    cfg = transformers.AutoConfig.from_pretrained(str(tiny_model))
    assert (shape.layers, shape.hidden, shape.heads, shape.kv_heads, shape.vocab, shape.intermediate) == (
        cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.vocab_size,
        cfg.intermediate_size)


def test_a_broken_config_json_is_a_planning_error_not_a_crash(tmp_path):
    import pytest

    import wizard
    from wizard.intent.errors import WizardError

    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen2"}')
    with pytest.raises(WizardError, match="VI601"):
        wizard.plan(wizard.make_answers({"model": str(folder)}), base_dir=str(tmp_path))
