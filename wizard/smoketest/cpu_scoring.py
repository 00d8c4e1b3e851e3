"""The cpu smoke's reward role: verl's own reward manager around the bundle's scorer, in a CPU-only Ray process
(as verl's reward loop workers), and the judge stand-in for reward=genrm.

Imported by the Ray worker processes; heavy imports stay inside functions.
"""

from __future__ import annotations

import json
import re
from typing import Any

from wizard.smoketest.cpu_roles import _whoami, _worker_setup


class JudgeStandIn:
    """A stand-in for the judge LLM behind verl's reward router (reward=genrm), on 127.0.0.1: an OpenAI
    chat-completions endpoint that grades the bundle's judge prompt with verl's rule scorer. It reads the reference and
    the response under the headings of the bundle's JUDGE_PROMPT ("Reference answer:", "Student's answer:") and
    answers "Score: 10" when verl's default_compute_score for the row's data_source gives the response full marks
    (for a data_source verl has no scorer for: when the reference is the response's last line or number), else
    "Score: 0". What is real around it: the bundle's judge function (its request over HTTP, its verdict parsing) and
    verl's reward manager. Requests are bounded (1 MiB) and the server is a daemon thread of the reward process."""

    LABEL = "a stand-in judge on CPU (grades with verl's rule scorer; the judge LLM needs vLLM or SGLang on a GPU)"
    MAX_BODY = 1 << 20
    _SECTIONS = re.compile(r"Reference answer:\s*(.*?)\s*Student's answer:\s*(.*?)\s*(?:\n\nJudge whether|$)", re.S)

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        judge = self
        self.data_source = ""

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                size = int(self.headers.get("Content-Length") or 0)
                if self.path.rstrip("/") != "/v1/chat/completions" or not 0 < size <= judge.MAX_BODY:
                    self.send_error(400 if size > judge.MAX_BODY else 404)
                    return
                try:
                    body = json.loads(self.rfile.read(size))
                    text = str(body["messages"][-1]["content"])
                except (ValueError, KeyError, IndexError, TypeError):
                    self.send_error(400)
                    return
                reply = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant",
                                                                         "content": judge.verdict(text)}}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:  # quiet
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True, name="judge-stand-in").start()

    def verdict(self, prompt: str) -> str:
        m = self._SECTIONS.search(prompt)
        if m is None:
            return "The prompt has no 'Reference answer:' / 'Student's answer:' sections to grade."
        reference, response = m.group(1).strip(), m.group(2).strip()
        return f"Stand-in verdict.\nScore: {10 if self._right(response, reference) else 0}"

    def _right(self, response: str, reference: str) -> bool:
        from verl.utils.reward_score import default_compute_score

        try:
            res = default_compute_score(self.data_source, response, reference)
            return float(res["score"] if isinstance(res, dict) else res) >= 1.0
        except NotImplementedError:  # no verl scorer for this data_source
            tail = response.strip().splitlines()[-1] if response.strip() else ""
            numbers = re.findall(r"-?\d[\d,]*(?:\.\d+)?", response)
            return bool(reference) and (tail.strip() == reference or (bool(numbers) and
                                                                       numbers[-1].replace(",", "") == reference))


class RewardRole:
    """verl's reward manager (`reward.reward_manager.name`) around the bundle's scorer, on CPU."""

    def __init__(self, config: dict[str, Any], seed: int) -> None:
        _worker_setup()
        from omegaconf import OmegaConf


        self.cfg = OmegaConf.create(config)
        self.manager: Any = None
        self.judge_kwargs: dict[str, Any] = {}

    def load(self, model_dir: str) -> dict[str, Any]:
        from transformers import AutoTokenizer

        from verl.trainer.ppo.reward import load_reward_manager

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        fn = self.cfg.reward.custom_reward_function
        self.judge_kwargs: dict[str, Any] = {}
        if self.cfg.reward.reward_model.enable and fn.get("path"):
            # a judge (reward=genrm): verl's reward manager hands the function the router's address and the judge's
            # tokenizer (naive.py:56-63); the judge LLM needs vLLM/SGLang on a GPU, so a stand-in answers here
            self.judge = JudgeStandIn()
            self.judge_kwargs = {"reward_router_address": self.judge.address, "reward_model_tokenizer": tokenizer}
        self.manager = load_reward_manager(self.cfg, tokenizer, **self.judge_kwargs)
        scorer = (f"{fn.path}:{fn.name}" if fn.get("path") else "verl's default_compute_score (by data_source)")
        if self.judge_kwargs:
            scorer += f" asking {JudgeStandIn.LABEL}"
        return {"manager": type(self.manager).__name__, "scorer": scorer, "who": _whoami("reward")}

    def who(self) -> dict[str, Any]:
        return _whoami("reward")

    def score(self, tensors: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Score every sample exactly as verl's RewardLoopWorker does (one run_single per sample)."""
        import copy

        import numpy as np

        from verl import DataProto

        non_tensors = {
            "data_source": np.array([r["data_source"] for r in rows], dtype=object),
            "reward_model": np.array([copy.deepcopy(r["reward_model"]) for r in rows], dtype=object),
            "extra_info": np.array([copy.deepcopy(r.get("extra_info") or {}) for r in rows], dtype=object),
        }
        data = DataProto.from_dict(tensors={k: tensors[k] for k in ("prompts", "responses", "attention_mask")},
                                   non_tensors=non_tensors)
        if self.judge_kwargs and rows:
            self.judge.data_source = str(rows[0]["data_source"])
        loop = self.manager.loop

        async def run_all() -> list[dict[str, Any]]:
            import asyncio

            return list(await asyncio.gather(*(self.manager.run_single(data[i:i + 1]) for i in range(len(data)))))

        results = loop.run_until_complete(run_all())
        scores = [float(r["reward_score"]) for r in results]
        rm_scores = type(self.manager).assemble_rm_scores(data, scores)
        decoded = [self.manager.tokenizer.decode(tensors["responses"][i][: int(tensors["response_mask"][i].sum())],
                                                 skip_special_tokens=True) for i in range(min(len(rows), 4))]
        return {"scores": scores, "rm_scores": rm_scores, "examples": decoded}

    def probe(self, items: list[dict[str, Any]]) -> list[float]:
        """Scores of hand-written responses (diagnosis only: never used for training)."""
        import inspect

        out = []
        for it in items:
            if self.judge_kwargs:
                self.judge.data_source = str(it["data_source"])
            res = self.manager.compute_score(data_source=it["data_source"], solution_str=it["text"],
                                             ground_truth=it["ground_truth"], extra_info=dict(it.get("extra_info") or {}),
                                             **self.judge_kwargs)
            if inspect.isawaitable(res):
                res = self.manager.loop.run_until_complete(res)
            out.append(float(res["score"] if isinstance(res, dict) else res))
        return out
