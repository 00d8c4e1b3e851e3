"""VI867 on prompts the chat template raises on (R101-01, verl#7725): a Qwen3.5-style template refuses a system
message after the first turn. Such a prompt is not a long one: the check says the template raises on it rather than
calling it longer than data.max_prompt_length. The oracle is verl's own apply_chat_template (with its Qwen3.5
fallback), which raises on the same prompt.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wizard.check.lint import check

pytestmark = [pytest.mark.verl]
SYSTEM_FIRST = ("{% for m in messages %}{% if m['role'] == 'system' and not loop.first %}"
                "{{ raise_exception('System message must be at the beginning.') }}{% endif %}"
                "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
                "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def _run(tmp_path: Path, tiny_model: Path, prompt: list[dict]):
    import pyarrow as pa
    import pyarrow.parquet as pq

    model = tmp_path / "model"
    shutil.copytree(tiny_model, model)
    cfg = json.loads((model / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg["chat_template"] = SYSTEM_FIRST
    (model / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    (model / "chat_template.jinja").unlink(missing_ok=True)
    rows = [{"data_source": "openai/gsm8k", "prompt": prompt, "reward_model": {"style": "rule", "ground_truth": "2"}}]
    data = tmp_path / "train.parquet"
    pq.write_table(pa.Table.from_pylist(rows * 8), data)
    script = tmp_path / "grpo.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n    " + " \\\n    ".join(
        ["algorithm.adv_estimator=grpo", f"data.train_files={data}", f"data.val_files={data}",
         "data.train_batch_size=8", "data.max_prompt_length=512", "data.filter_overlong_prompts=False",
         f"actor_rollout_ref.model.path={model}", "trainer.n_gpus_per_node=8", "trainer.nnodes=1"]) + "\n",
        encoding="utf-8")
    from transformers import AutoTokenizer
    from verl.utils.tokenizer.chat_template import apply_chat_template

    try:
        apply_chat_template(AutoTokenizer.from_pretrained(str(model)), prompt, tokenize=True)
        verl_raises = False
    except Exception:  # noqa: BLE001 - jinja2's TemplateError, as verl's agent loop meets it
        verl_raises = True
    return verl_raises, [f.problem for f in check(str(script)).findings if f.problem.rule == "VI867"]


def test_a_refused_prompt_is_named_as_refused_not_as_long(tmp_path, tiny_model):
    late = [{"role": "user", "content": "What is 1+1?"}, {"role": "system", "content": "Answer as #### N."}]
    verl_raises, hits = _run(tmp_path, tiny_model, late)
    assert verl_raises
    assert len(hits) == 1 and "raises on 8 of the 8 prompts" in hits[0].message, hits
    assert "longer than" not in hits[0].message


def test_a_system_first_prompt_stays_clean(tmp_path, tiny_model):
    first = [{"role": "system", "content": "Answer as #### N."}, {"role": "user", "content": "What is 1+1?"}]
    verl_raises, hits = _run(tmp_path, tiny_model, first)
    assert not verl_raises and not hits, hits
