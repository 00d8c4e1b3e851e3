"""Issue 27 item 6: a hub dataset's data/prepare_data.py offline ends in one line naming --local-dir, quickly, with
no traceback (the hub is asked once, with a short timeout, before `datasets` retries for half a minute)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

import wizard
from wizard.intent.answers import make_answers


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.mark.parametrize("how", ["HF_HUB_OFFLINE", "unreachable endpoint"])
def test_offline_hub_dataset_is_one_line_naming_local_dir(tmp_path, how):
    answers = make_answers(dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=80, model="Qwen/Qwen2.5-0.5B-Instruct",
                                dataset="gsm8k"))
    bundle = wizard.write_bundle(wizard.render(wizard.plan(answers, base_dir=str(tmp_path))), tmp_path / "b")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE"))}
    env["HF_HOME"] = str(tmp_path / "hf")  # an empty cache
    if how == "HF_HUB_OFFLINE":
        env["HF_HUB_OFFLINE"] = "1"
    else:
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{closed_port()}"
    start = time.monotonic()
    r = subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py")], capture_output=True, text=True,
                       timeout=120, env=env)
    took = time.monotonic() - start
    assert r.returncode != 0
    out = (r.stdout + r.stderr).strip()
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert "--local-dir" in out and "openai/gsm8k" in out
    assert took < 10, took
