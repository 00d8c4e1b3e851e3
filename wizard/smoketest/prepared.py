"""The prepared `--engine verl` smoke: everything one real `main_ppo` step needs on a GPU machine, made here.

    prep = prepare_gpu_smoke("runs/grpo-qwen", "gpu-smoke")   # builds gpu-smoke/tiny-model, returns the commands
    print(prep.script())                                    # or: scripts/gpu_smoke.py BUNDLE --out DIR [--run]

No hub is used: the model is a tiny causal LM of the bundle model's architecture, randomly initialised from a
config (wizard.smoketest.model, GPU-friendly dimensions TINY_GPU) and fitted for a few seconds on one right and one
wrong answer per prompt of the bundle's own rows, so that its sampled rewards vary; its tokenizer is the model's own
when it is on this machine, else one trained on the rows. The step runs in the bundle's geometry (scaled by the
verl engine, wizard.smoketest.verl) and its output is parsed into the same SmokeReport as the cpu engine's
(`verl-init smoke --engine verl --json`).

Heavy imports (torch, transformers, verl) happen inside functions.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


@dataclass
class PreparedSmoke:
    bundle: str
    model_dir: str
    model: dict[str, Any]
    steps: list[list[str]] = field(default_factory=list)  # each a command, run from the bundle folder
    env: dict[str, str] = field(default_factory=lambda: dict(OFFLINE_ENV))

    def script(self) -> str:
        """The commands as a shell script (what scripts/gpu_smoke.py prints)."""
        lines = ["#!/usr/bin/env bash", "# one real main_ppo step of the bundle on this GPU machine (verl-init smoke "
                 "--engine verl), with a tiny random-initialised model; no hub", "set -euo pipefail",
                 f"cd {shlex.quote(self.bundle)}"]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in self.env.items()]
        lines += [shlex.join(step) for step in self.steps]
        return "\n".join(lines) + "\n"


def smoke_command(bundle: str, model_dir: str, *, prompts: Optional[int] = None, timeout: float = 900.0) -> list[str]:
    """`verl-init smoke BUNDLE --engine verl --model-dir TINY --json`: main_ppo for one step, its report as JSON."""
    cmd = [sys.executable, "-m", "wizard.cli.app", "smoke", bundle, "--engine", "verl", "--model-dir", model_dir,
           "--timeout", f"{timeout:g}", "--json"]
    if prompts is not None:
        cmd += ["--prompts", str(prompts)]
    return cmd


def prepare_gpu_smoke(bundle: str | os.PathLike[str], out: str | os.PathLike[str], *, data_dir: Optional[str] = None,
                      prompts: Optional[int] = None, seed: int = 0) -> PreparedSmoke:
    """Build the tiny model under `out`/tiny-model and the commands of the GPU smoke. Raises UserError for a folder
    that is not a bundle; SmokeFailure (with a hint) when the bundle's rows cannot be read."""
    from wizard.intent.errors import UserError
    from wizard.smoketest.context import Display, SmokeContext, SmokeOptions
    from wizard.smoketest.report import SmokeReport
    from wizard.smoketest.run import _compose, _read_answers

    folder = Path(bundle).resolve()
    if not (folder / "verl_config.yaml").is_file():
        raise UserError(f"not a verl-init bundle: {folder} has no verl_config.yaml", "pass the folder verl-init wrote",
                        rule="VI960", keys=("bundle",))
    out_dir = Path(out).resolve()
    model_dir = out_dir / "tiny-model"
    if model_dir.exists() and any(model_dir.iterdir()):
        raise UserError(f"{model_dir} already exists", "pass an empty or new --out folder", rule="VI965", keys=("--out",))
    ctx = SmokeContext(str(folder), SmokeOptions(engine="verl", data_dir=data_dir, seed=seed),
                       SmokeReport(bundle=str(folder), engine="verl"), Display())
    ctx.cfg = _compose(str(folder))
    ctx.answers, ctx.plan, _ = _read_answers(str(folder))
    cfg = ctx.cfg
    created = not model_dir.exists()
    try:
        info = _build(ctx, cfg, model_dir, seed)
    except BaseException:  # nothing half-written is left behind (an empty folder given as --out stays empty)
        import shutil

        shutil.rmtree(model_dir, ignore_errors=True)
        if not created:
            model_dir.mkdir(parents=True, exist_ok=True)
        raise
    steps = []
    files = cfg.data.train_files
    first = str(files[0] if not isinstance(files, str) else files)
    if not os.path.isfile(first if os.path.isabs(first) else folder / first):
        prep = [sys.executable, "data/prepare_data.py"] + (["--local-dir", os.path.abspath(data_dir)] if data_dir else [])
        steps.append(prep)  # main_ppo reads the bundle's data files: write them first, as run.sh asks
    steps.append(smoke_command(str(folder), str(model_dir), prompts=prompts))
    return PreparedSmoke(bundle=str(folder), model_dir=str(model_dir), model=info.as_dict(), steps=steps)


def _build(ctx: Any, cfg: Any, model_dir: Path, seed: int) -> Any:
    """The tiny policy in model_dir, fitted on the bundle's rows as the cpu engine fits its own."""
    import tempfile

    from wizard.smoketest import cpu_data as cpu, model as smoke_model

    with tempfile.TemporaryDirectory(prefix="verl-init-gpu-smoke-") as work:
        ctx.workdir = work
        src, _how = cpu._rows_file(ctx)
        rows_path, _total = cpu._first_rows(src, os.path.join(work, "rows"), cpu.FIRST_ROWS)
        tok, tok_source = smoke_model.find_local_tokenizer(ctx.model_path)
        model_dir.mkdir(parents=True, exist_ok=True)
        if tok is None:
            tok = smoke_model.build_bpe_tokenizer(cpu._texts_for_tokenizer(rows_path), model_dir)
            tok_source = "a byte-level BPE tokenizer trained on the bundle's rows"
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        items, _kept = cpu._load_with_verl(ctx, rows_path, tok)
        max_prompt = int(cfg.data.max_prompt_length)
        ids = [smoke_model.prompt_ids(tok, list(it["raw_prompt"]))[-max_prompt:] for it in items]
        arch, arch_source = smoke_model.model_arch(ctx.model_path, ctx.answers_model, ctx.answers_params_b)
        shape = ctx.model_shape()
        seq = int(cfg.data.max_prompt_length) + int(cfg.data.max_response_length)
        info = smoke_model.build_tiny_policy(
            model_dir, arch=arch, arch_source=arch_source, tokenizer=tok, tokenizer_source=tok_source,
            examples=cpu.warmup_examples(items, ids, ctx.answer_format or "number"),
            kv_heads=2 if shape is None or shape.kv_heads < shape.heads else 4,
            tied=bool(shape.tied) if shape is not None else True, max_positions=max(4096, seq), seed=seed,
            dims=smoke_model.TINY_GPU)
    return info
