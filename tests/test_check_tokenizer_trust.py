"""VI693: the tokenizer's remote code and the flag verl 0.9.1 loads it with (held-out case R69-01, verl PR#865:
Moonlight's custom tokenizer, trust_remote_code given as data.trust_remote_code, which main_ppo no longer reads).

Oracles are verl's own code: verl's hf_tokenizer (the call HFModelConfig makes, workers/config/model.py:161) and
HFModelConfig itself refuse a tokenizer folder whose tokenizer_config.json maps AutoTokenizer to the folder's code
unless trust_remote_code is true, load it with the flag, and silently load transformers' built-in class when the
model_type has one; the readers of data.trust_remote_code named by the rule are read back from verl's source.
The tiny tokenizer is built here (tokenizers WordLevel); the remote-code loads run in a subprocess with their own
HF_MODULES_CACHE under tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.tokenizer_trust import _data_flag_readers, remote_tokenizer

CODE = ("from transformers import PreTrainedTokenizerFast\n\n\n"
        "class TinyRemoteTokenizer(PreTrainedTokenizerFast):\n    pass\n")


def _folder(tmp_path: Path, name: str, remote: bool = True, model_type: str | None = None) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = tmp_path / name
    folder.mkdir()
    tok = Tokenizer(models.WordLevel({"<unk>": 0, "<eos>": 1, "hello": 2, "world": 3}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(folder / "tokenizer.json"))
    config: dict = {"eos_token": "<eos>", "unk_token": "<unk>"}
    if remote:
        (folder / "tokenization_tiny.py").write_text(CODE, encoding="utf-8")
        config |= {"tokenizer_class": "TinyRemoteTokenizer",
                   "auto_map": {"AutoTokenizer": [None, "tokenization_tiny.TinyRemoteTokenizer"]}}
    else:
        config["tokenizer_class"] = "PreTrainedTokenizerFast"
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    if model_type:
        (folder / "config.json").write_text(json.dumps({"model_type": model_type}), encoding="utf-8")
    return folder


ORACLE = """
import json, sys
from verl.utils.tokenizer.tokenizer import hf_tokenizer
out = {}
for flag in (False, True):
    try:
        out[str(flag)] = type(hf_tokenizer(sys.argv[1], trust_remote_code=flag)).__name__
    except ValueError as e:
        out[str(flag)] = "refused" if "custom code" in str(e) else "ValueError"
print(json.dumps(out))
"""


def _verl_loads(tmp_path: Path, folder: Path) -> dict:
    env = dict(os.environ, HF_MODULES_CACHE=str(tmp_path / "modules"), HF_HUB_OFFLINE="1")
    run = subprocess.run([sys.executable, "-c", ORACLE, str(folder)], capture_output=True, text=True, env=env,
                         timeout=300, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def _vi693(*overrides: str) -> list:
    report = check(None, ["trainer.nnodes=1", "trainer.n_gpus_per_node=8", *overrides])
    return [f.problem for f in report.findings if f.problem.rule == "VI693"]


def test_verl_refuses_the_remote_tokenizer_without_the_flag(tmp_path):
    remote = _folder(tmp_path, "remote")
    fallback = _folder(tmp_path, "fallback", model_type="gpt2")
    plain = _folder(tmp_path, "plain", remote=False)
    assert _verl_loads(tmp_path, remote) == {"False": "refused", "True": "TinyRemoteTokenizer"}
    substituted = _verl_loads(tmp_path, fallback)
    assert substituted["True"] == "TinyRemoteTokenizer"
    assert substituted["False"] not in ("refused", "TinyRemoteTokenizer")
    assert _verl_loads(tmp_path, plain)["False"] != "refused"
    # the rule's reading of the folder agrees with what verl's load did
    assert remote_tokenizer(remote) == ("tokenization_tiny.TinyRemoteTokenizer", False)
    assert remote_tokenizer(fallback) == ("tokenization_tiny.TinyRemoteTokenizer", True)
    assert remote_tokenizer(plain) is None


def test_verl_model_config_loads_with_the_models_flag(tmp_path):
    from verl.workers.config.model import HFModelConfig

    with pytest.raises(ValueError, match="custom code"):
        HFModelConfig(path=str(_folder(tmp_path, "remote")), trust_remote_code=False)


def test_check_flags_the_remote_tokenizer(tmp_path):
    remote = _folder(tmp_path, "remote")
    [hit] = _vi693(f"actor_rollout_ref.model.path={remote}")
    assert hit.severity == "error" and hit.keys[0] == "actor_rollout_ref.model.trust_remote_code"
    assert "TinyRemoteTokenizer" in hit.message
    [soft] = _vi693(f"actor_rollout_ref.model.path={_folder(tmp_path, 'fallback', model_type='gpt2')}")
    assert soft.severity == "warning"
    # tokenizer_path is the folder verl loads the tokenizer from
    plain = _folder(tmp_path, "plain", remote=False)
    assert _vi693(f"actor_rollout_ref.model.path={plain}", f"actor_rollout_ref.model.tokenizer_path={remote}")
    # controls: the flag set, or a tokenizer transformers ships
    assert not _vi693(f"actor_rollout_ref.model.path={remote}", "actor_rollout_ref.model.trust_remote_code=true")
    assert not _vi693(f"actor_rollout_ref.model.path={plain}")


def test_data_flag_alone_is_read_by_no_main_ppo_code(tmp_path):
    [hit] = _vi693("actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "data.trust_remote_code=True")
    assert hit.severity == "warning" and "data.trust_remote_code" in hit.keys
    assert not _vi693("actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct", "data.trust_remote_code=True",
                      "actor_rollout_ref.model.trust_remote_code=True")
    assert not _vi693("actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct")


def test_the_readers_named_are_verls_own():
    import verl

    root = Path(verl.__file__).parent
    assert not _data_flag_readers("ppo")
    for entry in ("fully_async", "one_step_off"):
        [ref] = _data_flag_readers(entry)
        file, line = ref.removeprefix("verl/").rsplit(":", 1)
        text = (root / file).read_text(encoding="utf-8").splitlines()[int(line) - 1]
        assert 'data.get("trust_remote_code"' in text
    # main_ppo's trainers take the tokenizer from HFModelConfig, which loads it with the model's flag
    model_py = (root / "workers/config/model.py").read_text(encoding="utf-8")
    assert "hf_tokenizer(self.local_tokenizer_path, trust_remote_code=self.trust_remote_code)" in model_py
    trainer = (root / "trainer/ppo/v1/trainer_base.py").read_text(encoding="utf-8")
    assert "self.tokenizer = model_config.tokenizer" in trainer
