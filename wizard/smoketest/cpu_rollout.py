"""The cpu smoke's rollout and reward phases: generate, score, DAPO's group filter and refill, and the checks
that every drawn row reaches the batch and that the scorer tells right from wrong.
"""

from __future__ import annotations

from typing import Any

from wizard.smoketest.context import SmokeFailure
from wizard.smoketest.cpu_data import _distinct_prompts


def _cat(parts: list[dict[str, Any]]) -> dict[str, Any]:
    import torch

    keys = [k for k, v in parts[0].items() if hasattr(v, "shape")]
    return {k: torch.cat([p[k] for p in parts]) for k in keys}


def _fmt_list(values: list[float]) -> str:
    uniq = sorted(set(values))
    return f"{uniq[0]:g}" if len(uniq) == 1 else "/".join(f"{v:g}" for v in values[:6])


class RolloutPhase:
    """CpuRun's rollout and reward phases."""

    def _draw(self, cursor: int) -> tuple[list[list[int]], list[dict[str, Any]]]:
        """The prompts (token ids) and rows of one generation batch, in the order the data phase drew them."""
        end = cursor + self.sg.prompts
        return self.prompt_ids[cursor:end], self.items[cursor:end]

    def _spec(self, kind: str, width: int) -> dict[str, Any]:
        """How a pass splits its batch: `dp` ranks, then fixed micro-batches or a token budget (the bundle's full-length
        sequences per budget, times this run's padded width)."""
        sg = self.sg
        if kind == "update":
            micro, seqs = sg.micro, sg.seqs_per_budget
        elif kind == "critic":
            micro, seqs = sg.micro, sg.critic_seqs_per_budget
        elif kind == "ref":
            micro, seqs = sg.ref_logprob_micro, sg.ref_seqs_per_budget
        else:
            micro, seqs = sg.logprob_micro, sg.logprob_seqs_per_budget
        return {"dp": sg.dp, "mini_samples": sg.samples_per_update, "dynamic": sg.dynamic, "micro": micro,
                "token_budget": seqs * width}

    def rollout_and_reward(self) -> None:
        """Generate and score; with DAPO's group filtering, refill with new prompts as verl does."""
        import numpy as np
        import torch

        ctx, sg, cfg = self.ctx, self.sg, self.cfg
        n, temp = sg.n, float(cfg.actor_rollout_ref.rollout.temperature)
        kept: list[tuple[dict[str, Any], list[dict[str, Any]], list[float], str]] = []  # one entry per group
        all_scores: list[float] = []
        gen_batches, evicted, truncated, cursor, loaded = 0, 0, 0, 0, ""
        while True:
            prompts, rows = self._draw(cursor)
            with ctx.phase("rollout") as ph:
                if not loaded:
                    loaded = self.load_roles()
                roles = self.roles
                assert roles is not None
                out = ctx.get(roles.actor.generate.remote(prompts, n, sg.response_length, temp, True,
                                                          ctx.options.seed + gen_batches, self.width))
                truncated += int(out.pop("truncated"))
                self._record_drawn(cursor, out["prompts"], rows)
                lp_spec = self._spec("logprob", out["input_ids"].shape[1])
                lp = ctx.get(roles.actor.compute_log_prob.remote(out, lp_spec, True))  # verl: old log-probs from the actor
                out["old_log_probs"], out["entropy"] = lp["old_log_probs"], lp["entropy"]
                self.report.update["logprob_micro_batches_per_rank"] = lp["micro_batches_per_rank"]
                baseline = None
                if str(cfg.algorithm.adv_estimator) == "remax":  # ReMax: a greedy response per prompt is the baseline
                    baseline = ctx.get(roles.actor.generate.remote(prompts, 1, sg.response_length, temp, False,
                                                                   ctx.options.seed, self.width))
                    baseline.pop("truncated")
                generated = (gen_batches + 1) * sg.prompts * n
                ph.detail = (f"{loaded}; {generated} samples sampled (temperature {temp:g}, {n} per prompt, "
                             f"≤ {sg.response_length} tokens) in {gen_batches + 1} generation batch(es); "
                             "old log-probs from the actor")
            with ctx.phase("reward") as ph:
                sample_rows = [r for r in rows for _ in range(n)]
                scored = ctx.get(roles.reward.score.remote(out, sample_rows))
                base_scores = ctx.get(roles.reward.score.remote(baseline, rows))["scores"] if baseline is not None else None
                if gen_batches == 0:
                    self.report.reward["examples"] = scored["examples"]
                gen_batches += 1
                cursor += sg.prompts
                all_scores += scored["scores"]
                for j in range(len(prompts)):
                    sl = slice(j * n, (j + 1) * n)
                    group_scores = scored["scores"][sl]
                    if ctx.filter_groups and n > 1 and float(np.std(group_scores)) == 0.0:
                        evicted += 1  # verl's ReplayBuffer evicts groups whose rewards are identical
                        continue
                    group = {k: v[sl] for k, v in out.items() if hasattr(v, "shape")}
                    group["rm_scores"] = scored["rm_scores"][sl]
                    if base_scores is not None:
                        group["reward_baselines"] = torch.full((n,), float(base_scores[j]))
                    kept.append((group, [rows[j]] * n, group_scores, f"g{gen_batches}-{j}"))
                done = len(kept) >= sg.prompts or gen_batches >= ctx.max_gen_batches
                ph.detail = f"{len(all_scores)} samples scored"
                if done:
                    self.report.samples_generated = gen_batches * sg.prompts * n
                    self.rows_reach_batch()
                    self.reward_stats(all_scores, kept, gen_batches, evicted)
                    ph.detail = self.reward_detail
            if done:
                break
        kept = kept[: sg.prompts]
        batch = _cat([g for g, _, _, _ in kept])
        self.rows = [r for _, rows, _, _ in kept for r in rows]
        self.uids = np.array([uid for _, _, _, uid in kept for _ in range(n)], dtype=object)
        mask = batch["response_mask"].float()
        self.report.entropy = float((batch.pop("entropy") * mask).sum() / mask.sum())
        self.batch = batch
        lengths = batch["response_mask"].sum(-1).float()
        self.report.data["response_length_mean"] = round(float(lengths.mean()), 2)
        self.report.data["responses_cut_at_max_length"] = truncated

    def _record_drawn(self, cursor: int, prompts: Any, rows: list[dict[str, Any]]) -> None:
        """What reached one generation batch, read back from the batch's own tensors: each sample's prompt tokens
        (padding removed) and the ground truth of the row handed to the reward manager with it."""
        pad = self.tokenizer.pad_token_id
        n = self.sg.n
        got = []
        for i in range(prompts.shape[0]):
            ids = prompts[i].tolist()
            start = next((j for j, t in enumerate(ids) if t != pad), len(ids))
            got.append(ids[start:])
        truths = [str((r.get("reward_model") or {}).get("ground_truth", "")) for r in rows for _ in range(n)]
        self.drawn.append({"cursor": cursor, "prompts": got, "truths": truths})

    def rows_reach_batch(self) -> None:
        """Pitfall 4, measured: sample j·n … j·n+n-1 of every generation batch carries the prompt of the j-th row the
        data phase drew for it from verl's RLHFDataset (and that row's ground truth goes to the scorer)."""
        n, problems, rows_seen, expected_rows = self.sg.n, [], set(), 0
        for batch in self.drawn:
            cursor = batch["cursor"]
            for j in range(self.sg.prompts):
                expected_rows += 1
                want = self.prompt_ids[cursor + j] if cursor + j < len(self.prompt_ids) else None
                item = self.items[cursor + j] if cursor + j < len(self.items) else {}
                truth = str((item.get("reward_model") or {}).get("ground_truth", ""))
                samples = batch["prompts"][j * n:(j + 1) * n]
                truths = batch["truths"][j * n:(j + 1) * n]
                if len(samples) == n and all(p == want for p in samples) and all(t == truth for t in truths):
                    rows_seen.add(cursor + j)
                elif len(problems) < 4:
                    problems.append(f"row {cursor + j + 1} (of verl's loader) is not in samples {j * n + 1}-{j * n + n}"
                                    + ("" if all(t == truth for t in truths) else " (another row's ground truth)"))
        ok = len(rows_seen) == expected_rows and expected_rows > 0
        self.ctx.check(4, "rows_reach_batch", ok,
                       f"{len(rows_seen)} of {expected_rows} drawn row(s) reached the rollout batch, each as {n} "
                       "sample(s) with its own prompt tokens and ground truth"
                       + ("" if ok else " — " + "; ".join(problems)),
                       {"rows_expected": expected_rows, "rows_in_batch": len(rows_seen), "problems": problems},
                       hint="every row drawn from verl's loader must reach the rollout with its own ground truth "
                            "(a row lost or duplicated between the loader and the rollout)")

    def reward_stats(self, all_scores: list[float], kept: list[Any], gen_batches: int, evicted: int) -> None:
        import statistics

        ctx, sg = self.ctx, self.sg
        roles = self.roles
        assert roles is not None
        trained = [s for _, _, scores, _ in kept[: sg.prompts] for s in scores]
        mean = statistics.fmean(all_scores) if all_scores else 0.0
        std = statistics.pstdev(all_scores) if len(all_scores) > 1 else 0.0
        # diagnosis: how the scorer rates a right and a wrong answer written in the prompt's format
        from wizard.smoketest import model as smoke_model

        probes = []
        for _, item, truth, style in _distinct_prompts(self.items[: sg.prompts], ctx.answer_format or "number"):
            for kind, answer in (("right", truth), ("wrong", smoke_model.wrong_answer(truth, style))):
                probes.append({"kind": kind, "data_source": item["data_source"], "ground_truth": truth,
                               "extra_info": item.get("extra_info"), "text": smoke_model.response_text(style, answer)})
        probe_scores = ctx.get(roles.reward.probe.remote(probes))
        right = [s for p, s in zip(probes, probe_scores, strict=True) if p["kind"] == "right"]
        wrong = [s for p, s in zip(probes, probe_scores, strict=True) if p["kind"] == "wrong"]
        discriminates = bool(right) and all(r > w for r, w in zip(right, wrong, strict=True))
        self.report.reward.update({
            "mean": round(mean, 4), "std": round(std, 4), "min": min(all_scores, default=None),
            "max": max(all_scores, default=None), "scored": len(all_scores),
            "trained_mean": round(statistics.fmean(trained), 4) if trained else None,
            "generation_batches": gen_batches, "groups_evicted_identical_rewards": evicted if ctx.filter_groups else None,
            "probe": {"right_answer_scores": right, "wrong_answer_scores": wrong,
                      "note": "hand-written responses stating the ground truth / a wrong answer in the prompt's "
                              "format; diagnosis only, never trained on"},
        })
        self.report.reward_mean = round(statistics.fmean(trained), 4) if trained else round(mean, 4)
        self.report.reward_std = round(statistics.pstdev(trained), 4) if len(trained) > 1 else round(std, 4)
        scorer = self.report.reward.get("scorer", "")
        ctx.check(4, "scorer_discriminates", discriminates,
                  f"{scorer}: a response stating the ground truth scores {_fmt_list(right)}, a wrong one "
                  f"{_fmt_list(wrong)}" + ("" if discriminates else " — it cannot tell right from wrong"),
                  {"right": right, "wrong": wrong})
        constant = std == 0.0
        detail = (f"{len(all_scores)} samples scored by {self.report.reward.get('manager')} → {scorer}: mean {mean:.3f}, "
                  f"std {std:.3f}, min {min(all_scores, default=0):g}, max {max(all_scores, default=0):g}")
        if ctx.filter_groups:
            detail += f"; DAPO filter evicted {evicted} group(s) with identical rewards in {gen_batches} generation batch(es)"
        self.reward_detail = detail
        ctx.check(4, "rewards_vary", not constant, detail, {"mean": mean, "std": std, "n": len(all_scores)})
        if constant:
            value = all_scores[0] if all_scores else 0.0
            if not discriminates:
                cause = (f"the scorer gives {_fmt_list(right)} to responses that state the ground truth in the format "
                         f"the prompt asks for and {_fmt_list(wrong)} to wrong ones")
                hint = ("check data_source (it picks verl's scorer and its answer format), reward_model.ground_truth "
                        "(text, in the form the scorer compares) and the reward function")
            else:
                cause = "the scorer tells right from wrong, but every sampled response got the same score"
                hint = "raise --prompts so that more answers are sampled"
            raise SmokeFailure(f"every reward is {value:g} ({len(all_scores)} samples): {cause}", hint)
        if ctx.filter_groups and len(kept) < sg.prompts:
            raise SmokeFailure(f"DAPO group filtering kept {len(kept)} of {sg.prompts} groups after {gen_batches} "
                               "generation batches: rewards barely vary within a group",
                               ("check the reward function: verl 0.9.1 would keep sampling new prompts without limit "
                                "(it ignores algorithm.filter_groups.max_num_gen_batches)"))
