"""GRPO for the embedded policy: group-relative advantages, a clipped importance ratio
against the logprobs recorded at rollout time, and an optional KL penalty to the reference."""

from dataclasses import dataclass
from typing import Any

import numpy as np

from app.agent.transcript import parse_transcript
from app.backends.embedded.policy import Checkpoint, Decision, logprob_and_grad, plan_turn, replayer


@dataclass
class Sample:
    decisions: list[Decision]
    old_logprobs: list[float]
    advantage: float


def _choice_parts(item: Any) -> tuple[dict, list[dict]] | None:
    """(assistant message, logprob tokens) of a Choice: an openai model in process, a dict once it came back
    from JSON; a message is a plain dict."""
    if hasattr(item, "model_dump"):
        item = item.model_dump(mode="json")
    if not (isinstance(item, dict) and "message" in item):
        return None
    message = {k: v for k, v in item["message"].items() if v is not None}
    tokens = ((item.get("logprobs") or {}).get("content")) or []
    return message, tokens


def trajectory_samples(messages_and_choices: list[Any], advantage: float) -> Sample:
    prefix: list[dict] = []
    decisions: list[Decision] = []
    old: list[float] = []
    for item in messages_and_choices:
        parts = _choice_parts(item)
        if parts is None:
            prefix.append(dict(item))
            continue
        message, tokens = parts
        if tokens:
            _, replayed = plan_turn(parse_transcript(prefix), replayer([tok["token"] for tok in tokens]))
            decisions += replayed
            old += [float(tok["logprob"]) for tok in tokens]
        prefix.append(message)
    return Sample(decisions, old, advantage)


def group_samples(groups: list[Any], scale_rewards: bool) -> tuple[list[Sample], int, int]:
    """Samples with non-zero advantage, plus (groups trained, groups skipped for zero variance). A group is ART's
    TrajectoryGroup or its JSON in the same shape (`trajectories`, each with `reward` and `messages_and_choices`): the
    model server trains on JSON and never imports ART, which would cost seconds of CPU at each of its starts."""
    samples: list[Sample] = []
    trained = skipped = 0
    for group in groups:
        rewards = np.array([t.reward for t in group.trajectories], dtype=float)
        std = rewards.std() if rewards.size else 0.0
        if rewards.size < 2 or std < 1e-9:
            skipped += 1
            continue
        trained += 1
        advantages = rewards - rewards.mean()
        if scale_rewards:
            advantages /= std + 1e-6
        for trajectory, advantage in zip(group.trajectories, advantages):
            if advantage != 0:
                samples.append(trajectory_samples(trajectory.messages_and_choices, float(advantage)))
    return samples, trained, skipped


def grpo_update(
    checkpoint: Checkpoint,
    reference: dict[str, np.ndarray],
    samples: list[Sample],
    *,
    learning_rate: float,
    epsilon: float,
    epsilon_high: float,
    kl_penalty_coef: float,
    epochs: int,
) -> tuple[Checkpoint, dict[str, float]]:
    weights = {k: w.copy() for k, w in checkpoint.weights.items()}
    m = {k: checkpoint.m.get(k, np.zeros_like(w)).copy() for k, w in weights.items()}
    v = {k: checkpoint.v.get(k, np.zeros_like(w)).copy() for k, w in weights.items()}
    updates = checkpoint.updates
    beta1, beta2 = 0.9, 0.999
    losses, kls, clipped, counted, grad_norm = [], [], 0, 0, 0.0
    for _ in range(epochs):
        grads = {k: np.zeros_like(w) for k, w in weights.items()}
        objective = kl_sum = 0.0
        for sample in samples:
            scale = 1.0 / (len(sample.decisions) * len(samples)) if sample.decisions else 0.0
            for decision, old_logprob in zip(sample.decisions, sample.old_logprobs):
                logprob, grad = logprob_and_grad(weights, decision)
                ratio = float(np.exp(logprob - old_logprob))
                a = sample.advantage
                is_clipped = (a > 0 and ratio > 1 + epsilon_high) or (a < 0 and ratio < 1 - epsilon)
                bounded = float(np.clip(ratio, 1 - epsilon, 1 + epsilon_high))
                objective += scale * min(ratio * a, bounded * a)
                clipped += is_clipped
                counted += 1
                coef = 0.0 if is_clipped else a * ratio
                ref_logprob, _ = logprob_and_grad(reference, decision)
                log_ratio_ref = ref_logprob - logprob
                kl = float(np.exp(log_ratio_ref) - log_ratio_ref - 1)  # k3 estimator
                kl_sum += kl / max(1, len(sample.decisions) * len(samples))
                objective -= scale * kl_penalty_coef * kl
                coef -= kl_penalty_coef * (1 - float(np.exp(log_ratio_ref)))
                grads[decision.block] += scale * coef * grad
        losses.append(-objective)
        kls.append(kl_sum)
        grad_norm = float(np.sqrt(sum(float((g**2).sum()) for g in grads.values())))
        updates += 1
        for k in weights:  # Adam ascent on the objective
            m[k] = beta1 * m[k] + (1 - beta1) * grads[k]
            v[k] = beta2 * v[k] + (1 - beta2) * grads[k] ** 2
            m_hat = m[k] / (1 - beta1**updates)
            v_hat = v[k] / (1 - beta2**updates)
            weights[k] += learning_rate * m_hat / (np.sqrt(v_hat) + 1e-8)
    metrics = {
        "loss": float(np.mean(losses)) if losses else 0.0,
        "kl": float(kls[-1]) if kls else 0.0,
        "clip_fraction": clipped / counted if counted else 0.0,
        "grad_norm": grad_norm,
        "decisions": float(sum(len(s.decisions) for s in samples)),
    }
    return Checkpoint(weights, m, v, updates), metrics
