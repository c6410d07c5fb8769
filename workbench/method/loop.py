"""The CoEvoKG round, in the paper's fixed order (seed 000, section 3.5), and the runs built on it.

One round t (= one optimisation step):

1. the proposer samples chains from G_t and writes M candidates per chain (Eq. 2);
2. the quality gate admits the top k per chain (Eq. 6); an empty slot takes a seed question;
3. the solver rolls out G trajectories per admitted question (Eq. 3);
4. rewards: R_s (Eq. 7) with S_path (Eqs. 8-9) for the solver, R_p (Eq. 10) for the proposer;
5. one update of the shared backbone from the round's batch (Eqs. 11-12);
6. verified write-back advances G_t to G_t+1 (section 3.4).

The baselines and the build-up ablation rows (Tables 1-2) are ``MethodSpec`` values of the same
loop, under a matched budget: the same number of question slots, G rollouts per slot, and one
optimiser step per round (``method.minibatches`` steps, ours, when set).

The methods themselves (Search-R1, SSP, C1, C2, CoEvoKG) are ``MethodSpec`` rows in
``workbench/method/methods.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from workbench import store
from workbench.config import Config
from workbench.kg.pool import Chain, sample_chains
from workbench.method import rewards as R
from workbench.method.gate import StructuralVerifier, Verdict, gate
from workbench.method.methods import MethodSpec
from workbench.method.memory import ChainView, RetrievedPassage, WriteBackItem, write_back
from workbench.method.path_support import EvidenceGraph, PathSupportParams, extract_path
from workbench.method.proposer import parse_candidates, proposer_prompts, proposer_rewards
from workbench.method.rollout import Trajectory, batch_tensors, rollout
from workbench.method.update import (AdaptiveKL, NonFiniteGuard, entropy_from_logits, grpo_advantages,
                                     logprobs_from_logits, policy_loss, probability_scale,
                                     reinforce_pp_advantages, warmup_lr)
from workbench.policy import protocol
from workbench.scoring import exact_match


@dataclass
class Slot:
    """One solver batch slot: an admitted generated question, or a seed-pool fallback."""

    question_id: int
    question: str
    answers: list[str]
    hops: int
    source: str  # 'generated' or 'seed'
    chain: ChainView | None = None
    candidate: int | None = None  # index into the round's proposer sequences
    gold_chain: list[int] = field(default_factory=list)  # a seed question's gold entity chain


@dataclass
class RoundBatch:
    """Everything one round produced before the update."""

    slots: list[Slot] = field(default_factory=list)
    proposer_seqs: list[Trajectory] = field(default_factory=list)
    proposer_rewards: list[float | None] = field(default_factory=list)
    trajectories: list[Trajectory] = field(default_factory=list)
    solver_rewards: list[float] = field(default_factory=list)
    r_ans: list[float] = field(default_factory=list)
    s_path: list[float] = field(default_factory=list)
    paths: list[list[int]] = field(default_factory=list)  # Eq. 8's extracted entity path per trajectory
    verdicts: list[tuple[int, int, list[Verdict]]] = field(default_factory=list)  # (chain_id, first seq, verdicts)
    n_candidates: int = 0
    n_admitted: int = 0


@dataclass(frozen=True)
class TrajectoryScore:
    """One solver trajectory scored: R_ans, Eq. 8's path, Eq. 9's S_path (and pass), Eq. 7's R_s."""

    r_ans: float
    path: list[int]
    s_path: float
    passed: bool
    reward: float


def score_trajectory(traj: Trajectory, golds: list[str], titles: dict[int, str], graph: EvidenceGraph,
                     reward_fn=R.solver_reward, beta: float = 0.2) -> TrajectoryScore:
    """Score one trajectory as the loop does: exact match, the extracted path (Eq. 8) over the
    entities in ``titles`` (the retrieved ones plus the candidate answer entities), its support
    against G_t (Eq. 9), and the solver reward (Eq. 7, or the method's ``reward_fn``).

    Example:
        >>> from workbench.method.path_support import PathSupportParams
        >>> t = Trajectory(0, 0, "p", [], queries=["Ann"], entity_ids=[1], answer="Rome")
        >>> g = EvidenceGraph({(1, 2): 1.0}, PathSupportParams())
        >>> score_trajectory(t, ["Rome"], {1: "Ann", 2: "Rome"}, g)
        TrajectoryScore(r_ans=1.0, path=[1, 2], s_path=1.0, passed=True, reward=1.2)
    """
    r_ans = exact_match(traj.answer or "", golds)
    path = extract_path(traj.queries, traj.entity_ids, titles, traj.answer)
    verdict = graph.path_support(path) if len(path) >= 2 else None
    s_path = verdict.s_path if verdict else 0.0
    return TrajectoryScore(r_ans, path, s_path, bool(verdict and verdict.passed), reward_fn(r_ans, s_path, beta))


def chain_view(chain: Chain) -> ChainView:
    """The fields the method reads from a pool chain: titles, relations and node passages.

    A node shows its newest evidence, so passages that write-back attached in earlier rounds reach
    the proposer (section 3.4: later rounds condition on richer contexts).
    """
    passages, newest = [""] * len(chain.entity_ids), [-1] * len(chain.entity_ids)
    for ev in chain.evidence:
        if ev.target == "node" and ev.text and ev.round > newest[ev.position]:
            passages[ev.position], newest[ev.position] = ev.text, ev.round
    return ChainView(chain.chain_id, chain.hash, list(chain.entity_ids), list(chain.titles),
                     list(chain.relations), passages)


class OpenGate:
    """SSP's verifier: no chain to check against, so every candidate that passes the
    deterministic filter (extraction, leakage, one wh-question) scores 1 on every dimension."""

    def judge(self, chain, candidates):
        dims = ("faithfulness", "multi_hop", "single_answer", "clarity")
        return [Verdict(i, q, a, True, scores={d: 1.0 for d in dims}) for i, (q, a) in enumerate(candidates)]


class Trainer:
    """Holds the policy, its frozen reference, the optimiser and the search tool of one run."""

    def __init__(self, con, cfg: Config, spec: MethodSpec, run: str, policy, reference, search):
        self.con, self.cfg, self.spec, self.run = con, cfg, spec, run
        self.policy, self.reference, self.search = policy, reference, search
        self.optimizer = torch.optim.AdamW(policy.model.parameters(), lr=cfg.method.lr, weight_decay=0.0)
        self.guard = NonFiniteGuard(cfg.method.max_non_finite)
        self.kl = AdaptiveKL(cfg.method.kl_coef, cfg.method.kl_target, cfg.method.kl_horizon)
        self.verifier = StructuralVerifier() if spec.task_source == "kg_chains" else OpenGate()
        m = cfg.method
        self.path_params = PathSupportParams(m.path_alpha, m.path_beta, m.path_gamma, m.path_eta, m.path_eps,
                                             m.tau_path)
        self._g0: EvidenceGraph | None = None
        self.titles: dict[int, str] = dict(con.execute(
            "SELECT entity_id, title FROM entities").fetchall())
        self.seed_pool = con.execute(
            "SELECT question_id, question, answers, coalesce(hops, 1), coalesce(chain, []) FROM questions "
            "WHERE dataset = ? AND split = 'seed' ORDER BY question_id", [m.seed_dataset]).fetchall()
        if not self.seed_pool:
            raise ValueError(f"the store has no seed-pool questions (dataset {m.seed_dataset!r}, split 'seed'); "
                             "build a world (workbench world) or import one (workbench import qa --split seed) "
                             "and set method.seed_dataset")

    @property
    def pool_run(self) -> str | None:
        """Whose write-back G_t includes: this run's with write-back (C3), else G_0 alone."""
        return self.run if self.spec.write_back else None

    def evidence_graph(self, t: int) -> EvidenceGraph:
        """G_t for path support (Eqs. 8-9); without write-back G_t is G_0 in every round, built once."""
        if self.pool_run is None:
            if self._g0 is None:
                self._g0 = EvidenceGraph.from_store(self.con, run=None, round=0, params=self.path_params)
            return self._g0
        return EvidenceGraph.from_store(self.con, run=self.pool_run, round=t, params=self.path_params)

    # -- 1-2: proposer and gate ------------------------------------------------------------
    def _task_chains(self, t: int) -> list[ChainView]:
        m = self.cfg.method
        if self.spec.task_source == "kg_chains":
            return [chain_view(c) for c in sample_chains(self.con, m.chains_per_round, seed=self._seed(t, 1),
                                                        run=self.pool_run, round=t)]
        ids = self.con.execute(
            "SELECT e.entity_id FROM entities e WHERE e.kind = 'entity' AND EXISTS "
            "(SELECT 1 FROM passages p WHERE p.entity_id = e.entity_id) ORDER BY e.entity_id").fetchnumpy()["entity_id"]
        if len(ids) < m.chains_per_round:
            raise ValueError(f"method.chains_per_round={m.chains_per_round}: the store has only {len(ids)} entities "
                             "with passages")
        picked = [int(e) for e in np.random.default_rng(self._seed(t, 1)).choice(ids, m.chains_per_round, replace=False)]
        first = dict(self.con.execute(
            "SELECT entity_id, arg_min(text, paragraph) FROM passages WHERE entity_id IN (SELECT unnest(?)) "
            "GROUP BY entity_id", [picked]).fetchall())
        # SSP (section 4.1): the proposer sees one answer entity and its passage, no KG structure
        return [ChainView(-1, "", [e], [self.titles[e]], [], [first[e]]) for e in picked]

    def propose(self, t: int, batch: RoundBatch) -> None:
        """Eq. 2 and Eq. 6: M candidates per chain, gated; empty slots take seed questions."""
        m, r = self.cfg.method, self.cfg.rollout
        n_slots = m.chains_per_round * m.admit_top_k
        if self.spec.task_source == "seed_pool":
            batch.slots = self._seed_slots(t, n_slots)
            return
        chains = self._task_chains(t)
        prompts = proposer_prompts(self.policy.chat_prompt, chains, m.candidates_per_chain)
        gens = self.policy.generate(prompts, max_new_tokens=m.proposer_max_new_tokens, temperature=r.temperature,
                                    top_p=r.top_p, stop=(protocol.ANSWER_CLOSE,), seed=self._seed(t, 2))
        for i, (prompt, g) in enumerate(zip(prompts, gens)):
            batch.proposer_seqs.append(Trajectory(i, 0, prompt, self.policy.encode(prompt), list(g.token_ids),
                                                  [1] * len(g.token_ids), list(g.logprobs), text=g.text))
            batch.proposer_rewards.append(None)
        for c_idx, chain in enumerate(chains):
            lo = c_idx * m.candidates_per_chain
            cands = parse_candidates([s.text for s in batch.proposer_seqs[lo:lo + m.candidates_per_chain]])
            verdicts = gate(chain, cands, self.verifier, m.gate_threshold, m.admit_top_k, m.gate_aggregation,
                            allow_topic=m.gate_allow_topic)
            batch.n_candidates += len(verdicts)
            admitted = [v for v in verdicts if v.admitted]
            batch.n_admitted += len(admitted)
            for v in admitted:
                qid = self._store_generated(t, chain, v)
                batch.slots.append(Slot(qid, v.question, [v.answer], max(1, len(chain.titles) - 1), "generated",
                                        chain, lo + v.index))
            batch.verdicts.append((chain.chain_id, lo, verdicts))
        missing = n_slots - len(batch.slots)
        if missing > 0:  # seed fallback (section 3.2)
            batch.slots += self._seed_slots(t, missing)

    def _seed_slots(self, t: int, k: int) -> list[Slot]:
        rng = np.random.default_rng(self._seed(t, 3))
        picked = rng.choice(len(self.seed_pool), size=min(k, len(self.seed_pool)), replace=False)
        return [Slot(int(q), text, list(ans), int(h), "seed", gold_chain=list(chain)) for q, text, ans, h, chain in
                (self.seed_pool[int(i)] for i in picked)]

    def _store_generated(self, t: int, chain: ChainView, v: Verdict) -> int:
        qid = store.next_id(self.con, "questions", "question_id")
        self.con.execute("INSERT INTO questions VALUES (?, ?, ?, 'generated', ?, ?, ?, ?, 'proposer')",
                         [qid, f"generated/{self.run}", f"round-{t}", v.question, [v.answer],
                          chain.entity_ids, max(1, len(chain.titles) - 1)])
        return qid

    # -- 3-4: rollouts and rewards ---------------------------------------------------------
    def solve(self, t: int, batch: RoundBatch) -> None:
        """Eq. 3: G rollouts per slot at the training temperature."""
        r, m = self.cfg.rollout, self.cfg.method
        batch.trajectories = rollout(
            self.policy, self.search, [s.question for s in batch.slots], m.group_size, max_turns=r.max_turns,
            topk=self.cfg.search.topk, temperature=r.temperature, top_p=r.top_p, max_new_tokens=r.max_new_tokens,
            max_total_tokens=r.max_total_tokens, seed=self._seed(t, 4))

    def reward(self, t: int, batch: RoundBatch, graph: EvidenceGraph) -> dict:
        """Eq. 7 (solver, with Eqs. 8-9) and Eq. 10 or the method's proposer reward."""
        m = self.cfg.method
        solver_reward = R.SOLVER_REWARDS[self.spec.solver_reward]
        schedule = R.Schedule(t, m.steps, m.p_start, m.p_end, m.sigma)
        p_s = {"generated": [], "seed": []}
        for traj in batch.trajectories:
            slot = batch.slots[traj.question_index]
            score = score_trajectory(traj, slot.answers, self._titles_for(traj, slot), graph, solver_reward,
                                     m.beta_path)
            batch.paths.append(score.path)
            batch.r_ans.append(score.r_ans)
            batch.s_path.append(score.s_path)
            batch.solver_rewards.append(score.reward)
        g = m.group_size
        outcomes: dict[int, R.GroupOutcome] = {}  # proposer sequence -> the G rollouts of its question
        for i, slot in enumerate(batch.slots):
            correct = tuple(bool(x) for x in batch.r_ans[i * g:(i + 1) * g])
            p_s[slot.source].append(R.success_rate(correct))
            if slot.source == "generated":
                outcomes[slot.candidate] = R.GroupOutcome(correct, tuple(batch.solver_rewards[i * g:(i + 1) * g]))
        if self.spec.proposer_reward:
            for _, lo, verdicts in batch.verdicts:
                mine = {v.index: outcomes[lo + v.index] for v in verdicts if lo + v.index in outcomes}
                rewards = proposer_rewards(verdicts, mine, schedule, m.extraction_penalty, self.spec.proposer_reward,
                                           m.penalize_rejected)
                for v, r_p in zip(verdicts, rewards):
                    batch.proposer_rewards[lo + v.index] = r_p
        return p_s

    def _titles_for(self, traj: Trajectory, slot: Slot) -> dict[int, str]:
        # candidate answer entities: the originating chain's, or a seed question's gold chain (section 3.3:
        # the gold chain never grants process reward by itself; it only lets the path end at the answer)
        ids = set(traj.entity_ids) | set(slot.chain.entity_ids if slot.chain else slot.gold_chain)
        return {e: self.titles[e] for e in ids if e in self.titles}

    # -- 5: update -------------------------------------------------------------------------
    def update(self, t: int, batch: RoundBatch) -> dict:
        """Section 3.5: the clipped-surrogate update with the k3 KL to the frozen reference.

        Solver rows carry GRPO advantages (Eq. 11) broadcast to their generated tokens; proposer
        rows carry REINFORCE++ advantages (Eq. 12), whitened over the global proposer batch with the
        reward at the terminal token. Retrieved tokens are masked out (loss_mask = 0).
        """
        m = self.cfg.method
        rows: list[Trajectory] = []
        advantages: list[torch.Tensor] = []
        solver_adv = grpo_advantages(torch.tensor(batch.solver_rewards, dtype=torch.float32), m.group_size, m.adv_eps)
        for traj, a in zip(batch.trajectories, solver_adv):
            rows.append(traj)
            advantages.append(torch.full((len(traj.response_ids),), float(a)) * torch.tensor(traj.loss_mask))
        scored = [(s, r) for s, r in zip(batch.proposer_seqs, batch.proposer_rewards) if r is not None and s.response_ids]
        if scored:
            width = max(len(s.response_ids) for s, _ in scored)
            mask = torch.zeros(len(scored), width)
            terminal = torch.zeros(len(scored))
            for i, (s, r) in enumerate(scored):
                mask[i, :len(s.response_ids)] = 1
                terminal[i] = r
            prop_adv = reinforce_pp_advantages(terminal, mask, gamma=m.gamma, eps=m.adv_eps)
            for i, (s, _) in enumerate(scored):
                rows.append(s)
                advantages.append(prop_adv[i, :len(s.response_ids)])
        # section 3.5 says one update per round; splitting the round's batch into several optimiser
        # steps (veRL's ppo_mini_batch_size) is ours, method.minibatches (1 = the paper's one step)
        if not rows:
            return {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "skipped": 1}
        order = np.random.default_rng(self._seed(t, 5)).permutation(len(rows))
        parts = np.array_split(order, max(1, min(m.minibatches, len(rows))))
        steps = []
        for j, part in enumerate(parts):
            # the optimiser step's index counts every round's full share of minibatches, so a resumed
            # run warms up exactly as an uninterrupted one
            for group in self.optimizer.param_groups:
                group["lr"] = warmup_lr(m.lr, t * m.minibatches + j, m.warmup_steps)
            steps.append(self._step(t, [rows[i] for i in part], [advantages[i] for i in part]))
        out = {k: float(np.mean([s[k] for s in steps])) for k in ("loss", "kl", "entropy", "clip_fraction")}
        return {**out, "skipped": sum(s["skipped"] for s in steps)}

    def _step(self, t: int, rows: list[Trajectory], advantages: list[torch.Tensor]) -> dict:
        """One optimiser step on ``rows``: the token-mean surrogate over all of their loss tokens."""
        m = self.cfg.method
        total_tokens = sum(int(sum(r.loss_mask)) for r in rows)
        if total_tokens == 0:
            return {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0, "skipped": 1}
        self.policy.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        sums = {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_fraction": 0.0}
        pad = self.policy.tokenizer.pad_token_id
        order = sorted(range(len(rows)), key=lambda i: rows[i].length)  # similar lengths pad less
        for start in range(0, len(order), m.micro_batch):
            idx = order[start:start + m.micro_batch]
            tensors = batch_tensors([rows[i] for i in idx], pad)
            adv = torch.zeros_like(tensors["old_logprobs"])
            for j, i in enumerate(idx):
                p = len(rows[i].prompt_ids)
                adv[j, p:p + len(advantages[i])] = advantages[i]
            tensors = {k: v.to(self.policy.device) for k, v in tensors.items()}
            adv = adv.to(self.policy.device)
            new_logp, entropy = _logprobs_and_entropy(self.policy, tensors)
            with torch.no_grad():
                ref_logp = self.reference.token_logprobs(tensors["input_ids"], tensors["attention_mask"])
            mask = tensors["loss_mask"].float()
            adv = adv * probability_scale(new_logp.detach(), m.prob_scale_low, m.prob_scale_high)
            loss, stats = policy_loss(new_logp, tensors["old_logprobs"], ref_logp, adv, mask,
                                      m.clip_eps, self.kl.coef)
            share = float(mask.sum()) / total_tokens  # token-mean over all of this step's rows
            (loss * share).backward()
            sums["loss"] += float(loss.detach()) * share
            sums["kl"] += float(stats["kl"]) * share
            sums["clip_fraction"] += float(stats.get("clip_fraction", 0.0)) * share
            sums["entropy"] += float(entropy) * share
        self.policy.model.eval()
        if not self.guard.check(sums["loss"], sums["kl"], step=t):
            self.optimizer.zero_grad(set_to_none=True)
            return {**sums, "skipped": 1}
        norm = torch.nn.utils.clip_grad_norm_(self.policy.model.parameters(), m.max_grad_norm)
        if not self.guard.check(float(norm), 0.0, step=t):  # a non-finite gradient is skipped the same way
            self.optimizer.zero_grad(set_to_none=True)
            return {**sums, "skipped": 1}
        self.optimizer.step()
        self.kl.update(sums["kl"], len(rows))
        return {**sums, "skipped": 0}

    # -- 6: write-back ---------------------------------------------------------------------
    def write_back(self, t: int, batch: RoundBatch, trajectory_ids: list[int]) -> dict:
        """Section 3.4: verified evidence of generated-question trajectories into G_t+1."""
        if not self.spec.write_back:
            return {"new_chains": 0, "merged_evidence": 0, "skipped_duplicates": 0, "rejected": 0, "not_chains": 0}
        wanted = sorted({p for tr in batch.trajectories for p in tr.passage_ids})
        texts = dict(self.con.execute(
            "SELECT passage_id, text FROM passages WHERE passage_id IN (SELECT unnest(?))", [wanted]).fetchall()) if wanted else {}
        items = []
        for tr, tid, r_ans, s_path, path in zip(batch.trajectories, trajectory_ids, batch.r_ans, batch.s_path,
                                                batch.paths):
            slot = batch.slots[tr.question_index]
            if slot.chain is None or slot.chain.chain_id < 0:
                continue  # seed slots and SSP entities have no originating chain
            passages = [RetrievedPassage(p, e, texts.get(p, "")) for p, e in zip(tr.passage_ids, tr.entity_ids)]
            items.append(WriteBackItem(tid, slot.chain, r_ans, s_path, path, passages))
        return write_back(self.con, self.run, t, items, tau_path=self.cfg.method.tau_path)

    def _seed(self, t: int, stage: int) -> int:
        return int(self.cfg.method.seed) * 1_000_003 + t * 101 + stage


def _logprobs_and_entropy(policy, tensors: dict):
    """``Policy.token_logprobs`` of the given (right-padded, on-device) tokens, and the policy's
    mean entropy over the loss tokens, from the same forward pass."""
    ids, attn = tensors["input_ids"], tensors["attention_mask"]
    logits = policy.model(input_ids=ids, attention_mask=attn, use_cache=False).logits[:, :-1]
    picked = logprobs_from_logits(logits, ids[:, 1:]) * attn[:, 1:]
    logp = torch.cat([torch.zeros_like(picked[:, :1]), picked], dim=1)
    with torch.no_grad():
        ent = entropy_from_logits(logits.detach(), tensors["loss_mask"][:, 1:])
    return logp, ent
