"""VI949: a custom RL dataset class loaded from a file path that inherits RLHFDataset's overlong filter, with a
vision-language model (real case R73-01; verl#6472 the same symptom).

The oracle is verl's own code on the CPU: verl.utils.dataset.rl_dataset.get_dataset_class + the class it returns,
built on a tiny local tokenizer and a stand-in processor, filter the rows to 0 when the class comes from a file path
and keep them all under pkg:// (and with verl's own RLHFDataset). FILTER_METHODS is re-derived from verl's source.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from wizard.check.lint import check
from wizard.check.rules.custom_dataset import FILTER_METHODS, inherited_filter_methods

SUBCLASS = ("from verl.utils.dataset.rl_dataset import RLHFDataset\n\n\n"
            "class MyDataset(RLHFDataset):\n"
            "    def _read_files_and_tokenize(self):\n"
            "        super()._read_files_and_tokenize()\n")
BOUND = SUBCLASS + "".join(f"\n    {m} = RLHFDataset.{m}\n" for m in ("_build_messages", "_process_multi_modal_info"))
OWN_DEFS = SUBCLASS + ("\n    def _build_messages(self, example, key):\n"
                       "        return RLHFDataset._build_messages(self, example, key)\n\n"
                       "    def _process_multi_modal_info(self, *a, **k):\n"
                       "        return RLHFDataset._process_multi_modal_info(*a, **k)\n")
FAKE_PROCESSOR = ("class FakeProc:\n"
                  "    def __init__(self, tok):\n        self.tokenizer = tok\n\n"
                  "    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False, **kw):\n"
                  "        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, "
                  "tokenize=False)\n")


def _verl():
    return pytest.importorskip("verl")


def _tokenizer():
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<|im_start|>", "<|im_end|>", "user", "assistant", "hi", "there"]
    tok = Tokenizer(models.WordLevel(vocab={w: i for i, w in enumerate(words)}, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>")
    hf.chat_template = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} <|im_end|> "
                        "{% endfor %}")
    return hf


def _rows_kept(tmp_path: Path, monkeypatch, custom: dict | None) -> int:
    """verl's get_dataset_class + the class's own constructor, the overlong filter on, a processor given."""
    _verl()
    pd = pytest.importorskip("pandas")
    from omegaconf import OmegaConf

    from verl.utils.dataset.rl_dataset import get_dataset_class

    (tmp_path / "fakeproc_vi949.py").write_text(FAKE_PROCESSOR)
    monkeypatch.syspath_prepend(str(tmp_path))
    from fakeproc_vi949 import FakeProc  # importable: pickled by reference

    rows = 12
    data = tmp_path / "train.parquet"
    pd.DataFrame({"prompt": [[{"role": "user", "content": "hi there"}]] * rows, "data_source": ["x"] * rows}) \
        .to_parquet(data)
    cfg = {"max_prompt_length": 64, "filter_overlong_prompts": True, "filter_overlong_prompts_workers": 1,
           "cache_dir": str(tmp_path / "cache")}
    if custom:
        cfg["custom_cls"] = custom
    conf = OmegaConf.create(cfg)
    tok = _tokenizer()
    ds = get_dataset_class(conf)(data_files=[str(data)], tokenizer=tok, config=conf, processor=FakeProc(tok))
    return len(ds)


@pytest.mark.verl
def test_verl_drops_every_row_for_a_file_path_subclass(tmp_path, monkeypatch):
    (tmp_path / "mydataset_vi949.py").write_text(SUBCLASS)
    file_kept = _rows_kept(tmp_path, monkeypatch, {"path": str(tmp_path / "mydataset_vi949.py"), "name": "MyDataset"})
    assert file_kept == 0  # the fault: every row scored over-long
    pkg_kept = _rows_kept(tmp_path, monkeypatch, {"path": "pkg://mydataset_vi949", "name": "MyDataset"})
    assert pkg_kept == 12  # the fix: the same class by module
    assert _rows_kept(tmp_path, monkeypatch, None) == 12  # verl's own RLHFDataset
    (tmp_path / "bound_vi949.py").write_text(BOUND)
    bound = _rows_kept(tmp_path, monkeypatch, {"path": str(tmp_path / "bound_vi949.py"), "name": "MyDataset"})
    assert bound == 0  # bound in the class body: lost as well (VI949 counts them as inherited)
    (tmp_path / "defs_vi949.py").write_text(OWN_DEFS)
    defs = _rows_kept(tmp_path, monkeypatch, {"path": str(tmp_path / "defs_vi949.py"), "name": "MyDataset"})
    assert defs == 12  # `def`s in the class itself travel with it


@pytest.mark.verl
def test_filter_methods_match_verls_source():
    """FILTER_METHODS = the RLHFDataset methods maybe_filter_out_long_prompts' closures call on self."""
    verl = _verl()
    src = Path(verl.__file__).parent / "utils" / "dataset" / "rl_dataset.py"
    tree = ast.parse(src.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RLHFDataset")
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    filt = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "maybe_filter_out_long_prompts")
    called = set()
    for inner in ast.walk(filt):
        if isinstance(inner, ast.FunctionDef) and inner is not filt:
            for node in ast.walk(inner):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "self" \
                        and node.func.attr in methods:
                    called.add(node.func.attr)
    assert called == set(FILTER_METHODS)


def test_inherited_methods_read_from_the_class_file():
    parse = ast.parse
    assert inherited_filter_methods(parse(SUBCLASS), "MyDataset") == list(FILTER_METHODS)
    assert inherited_filter_methods(parse(OWN_DEFS), "MyDataset") == []
    assert inherited_filter_methods(parse(BOUND), "MyDataset") == list(FILTER_METHODS)
    plain = "import torch\n\n\nclass D(torch.utils.data.Dataset):\n    pass\n"
    assert inherited_filter_methods(parse(plain), "D") is None
    chain = SUBCLASS + "\n\nclass Child(MyDataset):\n    pass\n"
    assert inherited_filter_methods(parse(chain), "Child") == list(FILTER_METHODS)
    no_filter = ("from verl.utils.dataset.rl_dataset import RLHFDataset\n\n\nclass R(RLHFDataset):\n"
                 "    def _read_files_and_tokenize(self):\n        self.dataframe = []\n")
    assert inherited_filter_methods(parse(no_filter), "R") is None


def _launch(tmp_path: Path, *extra: str, processor: bool = True, cls_file: str = SUBCLASS) -> str:
    model = tmp_path / "vlm"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
                                                   "hidden_size": 896, "num_hidden_layers": 24,
                                                   "num_attention_heads": 14, "num_key_value_heads": 2,
                                                   "intermediate_size": 4864, "vocab_size": 151936}))
    if processor:
        (model / "preprocessor_config.json").write_text('{"image_processor_type": "Qwen2VLImageProcessor"}')
    (tmp_path / "my_ds.py").write_text(cls_file)
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n    " + " \\\n    ".join([
        "algorithm.adv_estimator=grpo", f"actor_rollout_ref.model.path={model}", "actor_rollout_ref.rollout.name=vllm",
        "data.train_batch_size=16", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.rollout.n=4",
        "trainer.n_gpus_per_node=8", *extra]) + "\n")
    return str(script)


def _vi949(tmp_path: Path, *extra: str, **kw) -> list:
    report = check(_launch(tmp_path, *extra, **kw), env={"HOME": str(tmp_path)})
    return [fd for fd in report.findings if fd.problem.rule == "VI949"]


@pytest.mark.parametrize("prefix", ["", "file://"])
def test_vi949_fires_on_the_planted_fault(tmp_path, prefix):
    found = _vi949(tmp_path, f"data.custom_cls.path={prefix}{tmp_path}/my_ds.py", "data.custom_cls.name=MyDataset",
                   "data.filter_overlong_prompts=True")
    assert len(found) == 1 and found[0].problem.severity == "error"
    assert "_build_messages" in found[0].problem.message and "pkg://" in found[0].problem.hint


@pytest.mark.parametrize("extra, kw", [
    ((f"data.custom_cls.path=pkg://my_ds", "data.custom_cls.name=MyDataset", "data.filter_overlong_prompts=True"), {}),
    (("data.custom_cls.path=FILE", "data.custom_cls.name=MyDataset", "data.filter_overlong_prompts=False"), {}),
    (("data.custom_cls.path=FILE", "data.custom_cls.name=MyDataset", "data.filter_overlong_prompts=True"),
     {"processor": False}),
    (("data.custom_cls.path=FILE", "data.custom_cls.name=MyDataset", "data.filter_overlong_prompts=True"),
     {"cls_file": OWN_DEFS}),
    (("data.filter_overlong_prompts=True",), {}),
], ids=["pkg-path", "filter-off", "text-model", "methods-defined", "verls-own-dataset"])
def test_vi949_controls_stay_clean(tmp_path, extra, kw):
    extra = tuple(e.replace("FILE", f"{tmp_path}/my_ds.py") for e in extra)
    assert _vi949(tmp_path, *extra, **kw) == []
