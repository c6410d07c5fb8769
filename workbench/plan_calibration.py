"""``workbench plan --calibrate BENCH.json``: the plan's throughput constants fitted from measurements.

``workbench bench gpu`` writes one JSON per run (``--parts update`` and/or ``--parts round``);
:func:`read` turns each into :class:`Measurement` s (an update step per variant, a round), each with
the configuration ``workbench plan`` needs to estimate the same thing (the shape, the preset and its
overrides, the trajectories' mean length, the gradient checkpointing mode the run chose, the GPU's
memory). :func:`fit` then sets each constant of :class:`plan.Assumptions` that a measurement
determines, as the ratio of the plan's own estimate at the constant's value 1 to the measured time
(the estimates are inversely proportional to ``mfu`` and ``decode_efficiency``):

* ``mfu``: from each round's ``update`` stage (old and reference log-probs and the update, at the
  round's tokens and optimiser steps); with no round, from each update step (``step_s``, which
  includes the reference's forward);
* ``decode_efficiency``: from each round's solver generation seconds (``rollouts_split_s.generate``);
* ``search_s``: each round's retrieval seconds a turn (only where the round searched);
* ``other_stages_s``: each round's stages the plan does not model (all but ``proposer_gate``,
  ``rollouts`` and ``update``: rewards, write-back, sync);
* ``proposer_overhead_s``: each round's ``proposer_gate`` seconds beyond the plan's estimate of its
  generation (at the fitted decode efficiency): the gate's checks, the prompts;
* ``activation_share``: from each update step run without checkpointing (``off``), its peak less
  the weights, the optimiser state and the log-prob logits, over the activations
  ``policy.checkpointing.activation_bytes`` estimates.

What a measurement fixes is not fitted but set while its own figures are estimated: the mean
trajectory length and generated share of its rollouts (a random-weight round runs every row to the
cap), the GPU's memory, and no retrieval where the round made no search.

Several measurements of one constant give their mean. The FLOP and byte counts do not make the
constants independent of the model's size (the H200's update reached 0.24 of its peak by this count
at 3B and ~0.3 at 8B, sessions 19-20), so :func:`at_shape` keeps the measurements at the planned
model's shape where there are any. :func:`compare` puts each measured figure
beside the plan's estimate with the fitted constants (what ``--calibrate`` prints, and what a later
session's measurements at another shape check). Packed update variants are skipped (the plan does
not model packing); a file without a field the fit needs is refused with one line naming the file
and the field.

Example:
    >>> bench = {"shape": "qwen2.5-3b", "gpu_memory_gib": 139.8, "update": {"batch": 8,
    ...     "tokens_per_row": 1024, "lora_rank": 16, "variants": [{"variant": "auto",
    ...     "checkpointing": "off", "packed": False, "step_s": 0.493, "peak_gib": 28.1}]}}
    >>> a, fits = fit(parse(bench, "bench.json"))
    >>> round(a.mfu, 3), [f.constant for f in fits]
    (0.311, ['mfu', 'activation_share'])
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from workbench.bench.shapes import SHAPES
from workbench.plan import GIB, Assumptions, Shape, activation_memory, checkpointing, generation_seconds, \
    memory_per_gpu, rows_at_once, time_per_round

MODES = ("off", "standard", "offload")
MODELLED = ("proposer_gate", "rollouts", "update")  # the round's stages the plan estimates itself


@dataclass(frozen=True)
class Measurement:
    """One measured thing (``kind`` 'update' or 'round') of a bench file: its shape, the
    configuration the plan estimates it at, the assumptions that the measurement itself fixes
    (mean trajectory length, generated share, GPU memory) and its figures (``bench`` keys)."""

    file: str
    kind: str
    label: str
    shape: Shape
    cfg: object
    fixed: dict
    figures: dict


@dataclass(frozen=True)
class Fit:
    """A fitted constant, its value, and the measurements it came from."""

    constant: str
    value: float
    sources: tuple[str, ...]


def _bad(file: str, field: str, expected: str) -> ValueError:
    return ValueError(f"{file}: {field}: expected {expected} (as `workbench bench gpu` writes it; "
                      "rerun it with this workbench or correct the file)")


def _get(d: dict, key: str, file: str, where: str, kind=(int, float), check=lambda v: v > 0, expected=None):
    """``d[key]`` when it is of ``kind`` and passes ``check``, else the one-line error naming file and field."""
    value = d.get(key) if isinstance(d, dict) else None
    if isinstance(value, bool) or not isinstance(value, kind) or not check(value):
        missing = "" if isinstance(d, dict) and key in d else " (missing)"
        raise _bad(file, f"{where}{key}{missing}", expected or ("an integer > 0" if kind is int else "a number > 0"))
    return value


def _shape(doc: dict, file: str) -> Shape:
    key = doc.get("shape")
    if key not in SHAPES:
        raise _bad(file, "shape", f"one of {sorted(SHAPES)}")
    return Shape.from_config({**SHAPES[key], "model_type": SHAPES[key]["arch"]})


def _gpu(doc: dict, file: str) -> dict:
    """The GPU memory the measurement ran on (a CPU plumbing run has none: the plan's default)."""
    if doc.get("gpu_memory_gib") is None:
        return {}
    return {"gpu_memory_gib": _get(doc, "gpu_memory_gib", file, "")}


def _updates(doc: dict, file: str, shape: Shape) -> list[Measurement]:
    from workbench.config import preset

    u = doc["update"]
    batch = _get(u, "batch", file, "update.", int)
    tokens = _get(u, "tokens_per_row", file, "update.", int)
    rank = _get(u, "lora_rank", file, "update.", int, lambda v: v >= 0, "an integer >= 0")
    rows = u.get("variants") or [{"variant": u.get("checkpointing"), **u}]
    out = []
    for i, row in enumerate(rows):
        where = f"update.variants[{i}]." if u.get("variants") else "update."
        if not isinstance(row, dict):
            raise _bad(file, where.rstrip("."), "an object per variant")
        if "skipped" in row or row.get("packed"):
            continue
        mode = _get(row, "checkpointing", file, where, str, lambda v: v in MODES, f"one of {list(MODES)}")
        step = _get(row, "step_s", file, where)
        peak = row.get("peak_gib")
        if peak is not None:
            peak = _get(row, "peak_gib", file, where)
        cfg = preset("paper", **{"method.lora_rank": rank, "method.micro_batch": batch, "method.minibatches": 1,
                                 "rollout.max_new_tokens": min(500, tokens), "rollout.max_total_tokens": tokens,
                                 "method.gradient_checkpointing": mode})
        figures = {"update step (s)": step} | ({"update step peak (GiB)": peak} if peak is not None else {})
        out.append(Measurement(file, "update", f"update {row.get('variant') or mode} ({mode})", shape, cfg,
                               _gpu(doc, file), figures))
    return out


def _round(doc: dict, file: str, shape: Shape) -> Measurement:
    from workbench.config import preset

    r = doc["round"]
    name = _get(r, "preset", file, "round.", str, lambda v: True, "a preset name")
    over = r.get("overrides")
    if not isinstance(over, dict):
        raise _bad(file, "round.overrides", "a dict of section.field: value")
    stages = r.get("stages_s")
    if not isinstance(stages, dict) or not all(isinstance(v, (int, float)) for v in stages.values()):
        raise _bad(file, "round.stages_s", "a dict of stage: seconds")
    for stage in ("rollouts", "update"):
        _get(stages, stage, file, "round.stages_s.")
    tokens = _get(r, "trajectory_tokens_mean", file, "round.")
    generated = _get(r, "generated_tokens_mean", file, "round.", check=lambda v: 0 < v <= tokens,
                     expected="a number in (0, trajectory_tokens_mean]")
    mode = r.get("checkpointing")
    if mode is not None:
        _get(r, "checkpointing", file, "round.", str, lambda v: v in MODES, f"one of {list(MODES)} or null")
        over = {**over, "method.gradient_checkpointing": mode}
    try:
        cfg = preset(name, **over)
    except ValueError as err:
        raise ValueError(f"{file}: round.preset / round.overrides: {err}") from None
    split = r.get("rollouts_split_s") or {}
    timed = {k: v for k, v in stages.items() if k != "validation"}  # validation: timed apart from the round
    figures = {f"{k} (s)": timed.get(k, 0.0) for k in MODELLED}
    figures["other stages (s)"] = sum(v for k, v in timed.items() if k not in MODELLED)
    figures["round (s)"] = sum(timed.values())
    if split.get("generate") is not None:
        figures["solver generation (s)"] = _get(split, "generate", file, "round.rollouts_split_s.")
        figures["solver retrieval (s)"] = _get(split, "retrieve", file, "round.rollouts_split_s.",
                                               check=lambda v: v >= 0, expected="a number >= 0")
    if r.get("peak_gib") is not None:
        figures["round peak (GiB)"] = _get(r, "peak_gib", file, "round.")
    fixed = {"mean_tokens": int(round(tokens)), "generated_share": generated / tokens} | _gpu(doc, file)
    if r.get("searches") == 0:  # a round that made no search (random weights) has no retrieval to estimate
        fixed["search_s"] = 0.0
    return Measurement(file, "round", f"round ({cfg.method.gradient_checkpointing})", shape, cfg, fixed, figures)


def parse(doc, file: str) -> list[Measurement]:
    """The measurements of one ``bench gpu`` JSON document ``doc`` read from ``file``.

    Example: see the module docstring.
    """
    if not isinstance(doc, dict):
        raise _bad(file, "(top level)", "a JSON object")
    shape = _shape(doc, file)
    if not any(isinstance(doc.get(k), dict) for k in ("update", "round")):
        raise _bad(file, "update / round", "the part `bench gpu --parts update` or `--parts round` writes")
    out = _updates(doc, file, shape) if isinstance(doc.get("update"), dict) else []
    if isinstance(doc.get("round"), dict):
        out.append(_round(doc, file, shape))
    if not out:
        raise _bad(file, "update.variants", "at least one unpacked variant that ran")
    return out


def read(path) -> list[Measurement]:
    """The measurements of the ``bench gpu`` JSON file at ``path`` (ValueError naming the file and the field)."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as err:
        raise ValueError(f"--calibrate {path}: cannot read it ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"--calibrate {path}: not JSON (line {err.lineno}: {err.msg})") from None
    return parse(doc, str(path))


def _at(m: Measurement, a: Assumptions) -> Assumptions:
    return dataclasses.replace(a, **m.fixed)


def _update_step(m: Measurement, a: Assumptions) -> float:
    """The plan's seconds of one update step of ``m``: the update's FLOPs and the reference's forward."""
    n, cfg = m.shape.parameters(), m.cfg
    tokens = cfg.method.micro_batch * cfg.rollout.max_total_tokens
    recompute = 0 if checkpointing(cfg, m.shape, a) == "off" else 2 * n
    per_token = (4 * n if cfg.method.lora_rank else 6 * n) + recompute + 2 * n
    return tokens * per_token / (a.peak_tflops * 1e12 * a.mfu)


def _update_peak(m: Measurement, a: Assumptions) -> float:
    """The plan's bytes of an update step alone: weights, reference, optimiser state, activations."""
    parts = memory_per_gpu(m.cfg, m.shape, 1, a)
    return parts["weights"] + parts["reference"] + parts["gradients+adam"] + activation_memory(
        m.cfg, m.shape, checkpointing(m.cfg, m.shape, a), a)


def _solver_generation(m: Measurement, a: Assumptions) -> float:
    cfg, length = m.cfg, min(a.mean_tokens, m.cfg.rollout.max_total_tokens)
    rows, at_once = rows_at_once(cfg, m.shape, 1, a)
    return generation_seconds(m.shape, rows, length * a.generated_share, length, at_once, a)


def estimate(m: Measurement, a: Assumptions) -> dict:
    """The plan's estimate of each of ``m``'s figures (the same keys) under assumptions ``a``."""
    a = _at(m, a)
    if m.kind == "update":
        out = {"update step (s)": _update_step(m, a), "update step peak (GiB)": _update_peak(m, a) / GIB}
        return {k: v for k, v in out.items() if k in m.figures}
    t = time_per_round(m.cfg, m.shape, 1, a)
    proposer = t["proposer generation"] + t["llm verifier and extractor"] + t["proposer gate and prompts"]
    out = {"proposer_gate (s)": proposer,
           "rollouts (s)": t["solver rollouts"], "solver generation (s)": _solver_generation(m, a),
           "solver retrieval (s)": m.cfg.rollout.max_turns * a.search_s,
           "update (s)": t["old and reference log-probs"] + t["update"],
           "other stages (s)": t["other stages (rewards, write-back, sync)"],
           "round (s)": t["total"] - t["validation"],
           "round peak (GiB)": memory_per_gpu(m.cfg, m.shape, 1, a)["total"] / GIB}
    return {k: v for k, v in out.items() if k in m.figures}


def at_shape(measurements: list[Measurement], shape: Shape) -> tuple[list[Measurement], str]:
    """The measurements to fit a plan of ``shape`` from: those at ``shape`` when there are any, else
    all; and a line saying which (printed with the fit)."""
    same = [m for m in measurements if m.shape == shape]
    if same and len(same) < len(measurements):
        return same, f"  (fitted from the {len(same)} measurement(s) at the planned model's shape; " \
                     f"{len(measurements) - len(same)} at other shapes compared only)"
    if not same:
        return measurements, "  (no measurement at the planned model's shape: constants from other shapes, " \
                             "which differ by shape; run `workbench bench gpu` at this one)"
    return measurements, ""


def fit(measurements: list[Measurement], a: Assumptions = Assumptions()) -> tuple[Assumptions, list[Fit]]:
    """The assumptions with every constant the measurements determine fitted (module docstring),
    and what each came from.

    Example: see the module docstring.
    """
    rounds = [m for m in measurements if m.kind == "round"]
    updates = [m for m in measurements if m.kind == "update"]
    found: dict[str, list[tuple[float, str]]] = {}

    def add(constant, value, m, figure):
        found.setdefault(constant, []).append((value, f"{m.file}: {m.label} {figure}"))

    unit = dataclasses.replace(a, mfu=1.0, decode_efficiency=1.0)
    for m in rounds:
        at = _at(m, unit)
        t = time_per_round(m.cfg, m.shape, 1, at)
        add("mfu", (t["old and reference log-probs"] + t["update"]) / m.figures["update (s)"], m, "update stage")
        efficiency = a.decode_efficiency
        if "solver generation (s)" in m.figures:
            efficiency = _solver_generation(m, at) / m.figures["solver generation (s)"]
            add("decode_efficiency", efficiency, m, "solver generation")
            if m.figures["solver retrieval (s)"] > 0 and "search_s" not in m.fixed:
                add("search_s", m.figures["solver retrieval (s)"] / m.cfg.rollout.max_turns, m, "solver retrieval")
        add("other_stages_s", m.figures["other stages (s)"], m, "stages not modelled (rewards, write-back, sync)")
        generation = (t["proposer generation"] + t["llm verifier and extractor"]) / efficiency
        add("proposer_overhead_s", max(0.0, m.figures["proposer_gate (s)"] - generation), m,
            "proposer stage beyond its generation")
    for m in updates:
        if not rounds:
            add("mfu", _update_step(m, _at(m, unit)) / m.figures["update step (s)"], m, "step")
        if m.cfg.method.gradient_checkpointing == "off" and "update step peak (GiB)" in m.figures:
            at = dataclasses.replace(_at(m, a), activation_share=1.0)
            full = activation_memory(m.cfg, m.shape, "off", at)
            logits = activation_memory(m.cfg, m.shape, "off", dataclasses.replace(at, activation_share=0.0))
            rest = _update_peak(m, at) - full
            share = (m.figures["update step peak (GiB)"] * GIB - rest - logits) / (full - logits)
            if share > 0:
                add("activation_share", share, m, "peak")
    fits = [Fit(k, sum(v for v, _ in vs) / len(vs), tuple(s for _, s in vs)) for k, vs in found.items()]
    return dataclasses.replace(a, **{f.constant: f.value for f in fits}), fits


def compare(measurements: list[Measurement], a: Assumptions) -> list[dict]:
    """Each measured figure beside the plan's estimate under ``a`` and their difference (a share of the measured)."""
    rows = []
    for m in measurements:
        plan = estimate(m, a)
        rows += [{"file": m.file, "what": m.label, "figure": k, "measured": v, "plan": plan[k],
                  "difference": plan[k] / v - 1 if v else None} for k, v in m.figures.items() if k in plan]
    return rows


def format_calibration(fits: list[Fit], rows: list[dict], note: str = "") -> str:
    """What ``workbench plan --calibrate`` prints before the plan: each fitted constant and its
    sources (and ``note``, :func:`at_shape`'s line), then each measured figure beside the calibrated plan's."""
    lines = ["calibration (workbench bench gpu's measurements; the plan below uses these constants):"]
    lines += [note] if note else []
    for f in fits:
        lines.append(f"  {f.constant} = {f.value:.4g}  from " + "; ".join(f.sources))
    lines.append("  measured vs the calibrated plan:")
    for r in rows:
        diff = "" if r["difference"] is None else f"{100 * r['difference']:+.0f}%"
        lines.append(f"    {Path(r['file']).name}{' (--check, not fitted)' if r.get('held_out') else ''}: "
                     f"{r['what']}: {r['figure']} measured {r['measured']:.3g}, plan {r['plan']:.3g} ({diff})")
    return "\n".join(lines)
