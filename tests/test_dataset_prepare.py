"""data/prepare_data.py: each variant is rendered, run on the shipped tiny files (no network), and its
output is loaded by verl's own RLHFDataset, passes validate-dataset, and is scored by verl's default
scorer (or the bundle's reward_fn.py) as a correct and a wrong answer."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import wizard
from wizard.intent.answers import make_answers

DATA = Path(__file__).resolve().parent / "data"
BASE = dict(nnodes=1, gpus_per_node=1, gpu_memory_gb=24, model="Qwen/Qwen2.5-0.5B-Instruct",
            prompts_per_step=2, samples_per_prompt=4, updates_per_step=1)  # the sample files hold 4-10 rows (VI519)
SCHEMA_KEYS = ["data_source", "prompt", "ability", "reward_model", "extra_info"]

# name: (answer changes, prepare_data.py arguments)
VARIANTS = {
    "gsm8k-local-dir": (dict(dataset="gsm8k"), ["--local-dir", str(DATA / "gsm8k")]),
    "math-local-dir": (dict(dataset="math"), ["--local-dir", str(DATA / "math")]),
    "jsonl": (dict(dataset=str(DATA / "qa/plain.jsonl")), []),
    "csv": (dict(dataset=str(DATA / "qa/plain.csv")), []),
    "json": (dict(dataset=str(DATA / "qa/plain.json")), []),
    "parquet": (dict(dataset=str(DATA / "qa/plain.parquet"), question_field="q", answer_field="a"), []),
    "chat": (dict(dataset=str(DATA / "chat/chat.jsonl"), messages_field="messages"), []),
    "boxed-file": (dict(dataset=str(DATA / "math/data/train-00000-of-00001.jsonl"), question_field="problem",
                        answer_field="solution", answer_format="boxed", val_fraction=0.25), []),
    "text-function": (dict(dataset=str(DATA / "qa/text.jsonl"), question_field="prompt_text",
                           answer_field="reference", answer_format="text", reward="function"), []),
}


def make_bundle(tmp_path: Path, name: str = "bundle", **changes) -> Path:
    answers = make_answers({**BASE, **changes})
    plan = wizard.plan(answers, base_dir=str(tmp_path))
    return wizard.write_bundle(wizard.render(plan), tmp_path / name)


def run_prepare(bundle: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(bundle / "data" / "prepare_data.py"), *args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=bundle.parent)


def read_parquet(path: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def correct_response(row: dict) -> str:
    """A response that states the row's ground truth in the format its prompt asks for."""
    gt = row["reward_model"]["ground_truth"]
    asked = row["prompt"][-1]["content"]
    if "####" in asked:
        return f"Let me compute. The result is {gt}.\n#### {gt}"
    if "\\boxed{}" in asked:
        return f"So the answer is $\\boxed{{{gt}}}$."
    return f"Thinking...\nAnswer: {gt}"


def wrong_response(row: dict) -> str:
    return correct_response({**row, "reward_model": {"ground_truth": "123456789"}})


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_writes_verl_schema(name, tmp_path):
    changes, args = VARIANTS[name]
    bundle = make_bundle(tmp_path, **changes)
    r = run_prepare(bundle, *args)
    assert r.returncode == 0, r.stderr
    train = read_parquet(bundle / "data" / "train.parquet")
    val = read_parquet(bundle / "data" / "val.parquet")
    assert train and val
    for split, rows in (("train", train), ("val", val)):
        for i, row in enumerate(rows):
            assert list(row) == SCHEMA_KEYS
            assert isinstance(row["data_source"], str) and row["data_source"]
            assert isinstance(row["prompt"], list) and row["prompt"][-1]["role"] == "user"
            assert all(set(m) == {"role", "content"} and isinstance(m["content"], str) for m in row["prompt"])
            assert row["reward_model"]["style"] == "rule"
            assert isinstance(row["reward_model"]["ground_truth"], str) and row["reward_model"]["ground_truth"]
            assert row["extra_info"]["split"] == split and row["extra_info"]["index"] == i


def test_gsm8k_answers_extracted_as_verl_does(tmp_path):
    bundle = make_bundle(tmp_path, dataset="gsm8k")
    assert run_prepare(bundle, "--local-dir", str(DATA / "gsm8k")).returncode == 0
    train = read_parquet(bundle / "data" / "train.parquet")
    assert [r["reward_model"]["ground_truth"] for r in train] == ["7", "60", "2400", "60", "-3"]
    assert train[0]["data_source"] == "openai/gsm8k"
    assert train[0]["prompt"][0]["content"].endswith('Let\'s think step by step and output the final answer after "####".')
    assert train[0]["extra_info"]["answer"].endswith("#### 7")
    assert [r["extra_info"]["split"] for r in read_parquet(bundle / "data" / "val.parquet")] == ["val"] * 3


def test_math_boxed_answers(tmp_path):
    bundle = make_bundle(tmp_path, dataset="math")
    assert run_prepare(bundle, "--local-dir", str(DATA / "math")).returncode == 0
    truths = [r["reward_model"]["ground_truth"] for r in read_parquet(bundle / "data" / "train.parquet")]
    assert truths == ["\\frac{3}{4}", "4", "7", "x^6"]


def test_local_file_numbers_normalised_and_split_is_seeded(tmp_path):
    bundle = make_bundle(tmp_path, dataset=str(DATA / "qa/plain.jsonl"), val_fraction=0.2, split_seed=7)
    assert run_prepare(bundle).returncode == 0
    train = read_parquet(bundle / "data" / "train.parquet")
    val = read_parquet(bundle / "data" / "val.parquet")
    assert len(train) == 8 and len(val) == 2
    by_row = {r["extra_info"]["row"]: r["reward_model"]["ground_truth"] for r in train + val}
    # "Each dog has 4 legs, so 12." -> 12; "1,234" -> 1234; "#### 120" -> 120; "4.0" -> 4
    assert by_row == {0: "5", 1: "40", 2: "12", 3: "99", 4: "4.5", 5: "1234", 6: "49", 7: "-7", 8: "120", 9: "4"}
    # same seed, same split; another seed, another split
    again = make_bundle(tmp_path, "again", dataset=str(DATA / "qa/plain.jsonl"), val_fraction=0.2, split_seed=7)
    assert run_prepare(again).returncode == 0
    assert read_parquet(again / "data" / "val.parquet") == val
    other = make_bundle(tmp_path, "other", dataset=str(DATA / "qa/plain.jsonl"), val_fraction=0.2, split_seed=8)
    assert run_prepare(other).returncode == 0
    assert [r["extra_info"]["row"] for r in read_parquet(other / "data" / "val.parquet")] != \
        [r["extra_info"]["row"] for r in val]


def test_chat_source_prompt_ends_at_user_turn_and_bad_rows_are_reported(tmp_path):
    bundle = make_bundle(tmp_path, dataset=str(DATA / "chat/chat.jsonl"), messages_field="messages", val_fraction=0)
    r = run_prepare(bundle)
    assert r.returncode == 0
    assert "skipped train row 5: message 0 has role 'narrator' (allowed: system, user, assistant, tool)" in r.stderr
    rows = {x["extra_info"]["row"]: x for x in read_parquet(bundle / "data" / "train.parquet")}
    assert sorted(rows) == [0, 1, 2, 3, 4]
    assert [m["role"] for m in rows[0]["prompt"]] == ["system", "user"]  # its own system message kept
    assert rows[0]["reward_model"]["ground_truth"] == "42"  # from the assistant reply
    assert rows[2]["reward_model"]["ground_truth"] == "10"  # from the answer column
    assert [m["role"] for m in rows[3]["prompt"]] == ["user", "assistant", "user"]  # multi-turn kept
    assert rows[3]["reward_model"]["ground_truth"] == "2"
    assert not (bundle / "data" / "val.parquet").exists()  # val_fraction=0
    r = run_prepare(bundle, "--strict")
    assert r.returncode == 1


def test_user_strings_cannot_break_out_of_the_script(tmp_path):
    # prose answers (system_prompt, instruction) may hold newlines and tabs; NUL and other control characters
    # are refused in every answer (tests/test_hardening_answers.py)
    nasty = 'a "quote", a \'quote\', """triple""", \'\'\' too, \\ backslash, {{ jinja }}, {% x %}, ${x}\n# newline\t'
    bundle = make_bundle(tmp_path, dataset=str(DATA / "qa/plain.jsonl"), system_prompt=nasty,
                         instruction="Q: {question}\nEnd with #### and the number. " + nasty,
                         data_source="my \"src\" \\", question_field="question", reward="function")
    source = (bundle / "data" / "prepare_data.py").read_text()
    compile(source, "prepare_data.py", "exec")
    assert run_prepare(bundle).returncode == 0
    row = read_parquet(bundle / "data" / "train.parquet")[0]
    assert row["prompt"][0] == {"role": "system", "content": nasty}
    assert row["prompt"][1]["content"] == f"Q: {row['extra_info']['question']}\nEnd with #### and the number. {nasty}"
    assert row["data_source"] == "my \"src\" \\"


def test_instruction_can_be_empty(tmp_path):
    bundle = make_bundle(tmp_path, dataset=str(DATA / "qa/plain.jsonl"), instruction="", val_fraction=0)
    assert run_prepare(bundle).returncode == 0
    assert read_parquet(bundle / "data" / "train.parquet")[0]["prompt"][0]["content"] == "What is 2 + 3?"


def test_missing_column_is_reported_not_a_traceback(tmp_path):
    """The planner refuses a column the file lacks (VI546, tests/test_data_schema.py); a file swapped in after the
    render (`--input`) that lacks the mapped column is still one line per skipped row, no traceback."""
    bundle = make_bundle(tmp_path, dataset=str(DATA / "qa/plain.jsonl"))
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_text(json.dumps({"id": 1, "prompt": "1+1?", "answer": "2"}) + "\n")
    r = run_prepare(bundle, "--input", str(swapped))
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "skipped train row 0: no 'question' value" in r.stderr and "no usable training rows" in r.stderr


def test_out_and_input_options(tmp_path):
    bundle = make_bundle(tmp_path, dataset=str(DATA / "qa/plain.jsonl"))
    out = tmp_path / "elsewhere"
    r = run_prepare(bundle, "--out", str(out), "--input", str(DATA / "qa/plain.csv"))
    assert r.returncode == 0, r.stderr
    assert (out / "train.parquet").is_file() and not (bundle / "data" / "train.parquet").exists()
    r = run_prepare(bundle, "--local-dir", str(DATA))
    assert r.returncode == 2 and "--local-dir is for the gsm8k / math hub datasets" in r.stderr


FAKE_DATASETS = textwrap.dedent('''
    """Stands in for the `datasets` library: records the call, serves the shipped local copy."""
    import json, os
    CALLS = os.environ["FAKE_DATASETS_LOG"]
    ROOT = os.environ["FAKE_DATASETS_ROOT"]

    def load_dataset(*args, split=None, **kwargs):
        with open(CALLS, "a") as fh:
            fh.write(json.dumps({"args": list(args), "split": split, "kwargs": kwargs}) + "\\n")
        sub = {"openai/gsm8k": "gsm8k/main", "DigitalLearningGmbH/MATH-lighteval": "math/data"}[args[0]]
        with open(os.path.join(ROOT, sub, split + "-00000-of-00001.jsonl")) as fh:
            return [json.loads(line) for line in fh]
''')


@pytest.mark.parametrize("dataset,expected", [
    ("gsm8k", [["openai/gsm8k", "main"], "train", ["openai/gsm8k", "main"], "test"]),
    ("math", [["DigitalLearningGmbH/MATH-lighteval"], "train", ["DigitalLearningGmbH/MATH-lighteval"], "test"]),
])
def test_hub_download_by_name(dataset, expected, tmp_path):
    """Without --local-dir the script asks the hub whether it can serve the dataset (one HEAD request, answered here
    by a server on 127.0.0.1 named by HF_ENDPOINT) and then the datasets library for it by name (faked here)."""
    import http.server
    import threading

    heads: list[str] = []

    class Hub(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):  # noqa: N802 - http.server's name
            heads.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "datasets.py").write_text(FAKE_DATASETS)
    log = tmp_path / "calls.jsonl"
    env = {"PYTHONPATH": str(fake), "FAKE_DATASETS_LOG": str(log), "FAKE_DATASETS_ROOT": str(DATA),
           "PATH": "/usr/bin:/bin", "HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}", "NO_PROXY": "127.0.0.1"}
    bundle = make_bundle(tmp_path, dataset=dataset)
    try:
        r = run_prepare(bundle, env=env)
    finally:
        server.shutdown()
    assert heads and heads[0].startswith("/api/datasets/"), heads
    assert r.returncode == 0, r.stderr
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [calls[0]["args"], calls[0]["split"], calls[1]["args"], calls[1]["split"]] == expected
    assert len(read_parquet(bundle / "data" / "val.parquet")) == (3 if dataset == "gsm8k" else 2)


# -- the proof with verl's own code -------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    from wizard.smoketest.tiny import build_tokenizer

    path = tmp_path_factory.mktemp("tok")
    build_tokenizer(path)
    return path


@pytest.mark.verl
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_loads_in_rlhfdataset_validates_and_scores(name, tmp_path, tokenizer_dir):
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.utils.import_utils import load_extern_object
    from verl.utils.reward_score import default_compute_score

    from wizard.env.datasets import Options, validate

    changes, args = VARIANTS[name]
    bundle = make_bundle(tmp_path, **changes)
    assert run_prepare(bundle, *args).returncode == 0
    train, val = bundle / "data" / "train.parquet", bundle / "data" / "val.parquet"

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": True,
                            "filter_overlong_prompts_workers": 1, "cache_dir": str(tmp_path / "cache")})
    ds = RLHFDataset([str(train)], tok, cfg)
    n_rows = len(read_parquet(train))
    assert len(ds) == n_rows  # nothing silently dropped
    item = ds[0]
    assert item["raw_prompt"] == item["prompt"] and item["index"] == 0
    assert {"data_source", "reward_model", "extra_info"} <= set(item)

    custom = None
    cfg_yaml = (bundle / "verl_config.yaml").read_text()
    if "custom_reward_function" in cfg_yaml:
        custom = str(bundle / "reward" / "reward_fn.py")
    report = validate([str(train), str(val)], Options(tokenizer=tok, tokenizer_name=str(tokenizer_dir),
                                                     max_prompt_length=512, reward_function=custom))
    assert report.ok, [f.as_dict() for f in report.findings]
    assert not [f for f in report.findings if f.severity == "warning"], [f.as_dict() for f in report.findings]

    score = load_extern_object(custom, "compute_score") if custom else default_compute_score
    for row in read_parquet(train) + read_parquet(val):
        gt = row["reward_model"]["ground_truth"]
        good = score(row["data_source"], correct_response(row), gt, extra_info=row["extra_info"])
        bad = score(row["data_source"], wrong_response(row), gt, extra_info=row["extra_info"])
        good = good["score"] if isinstance(good, dict) else good
        bad = bad["score"] if isinstance(bad, dict) else bad
        assert good == 1.0 and bad <= 0.0, (name, row, good, bad)
