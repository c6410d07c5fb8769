"""EoG's task source ``kg_topology`` (seed 004): each task a query of its Table 6 executed on the KG
(:mod:`.queries`), written for by the proposer in one batched generation and gated against the
query's complete answer set; the test set's queries held out of every draw.

Example:
    >>> from workbench.method.tasks import TASK_SOURCES
    >>> TASK_SOURCES["kg_topology"] is TopologyTasks, TopologyTasks.reads_pool
    (True, False)
"""

from __future__ import annotations

from workbench.kg import topology, topology_qa
from workbench.method.memory import ChainView
from workbench.method.round import Candidate, ChainTask, Slot
from workbench.method.tasks import TASK_SOURCES, WrittenTasks
from workbench.peers.eog import queries as eog


@TASK_SOURCES.register("kg_topology")
class TopologyTasks(WrittenTasks):
    """Queries of ``method.topology_patterns`` drawn from the KG's topology graph (made at the first
    draw, on rank 0), each prompted as a skeleton (or witness; ``method.topology_prompt``)."""

    def __init__(self, trainer):
        super().__init__(trainer)
        self.patterns = eog.parse_patterns(trainer.cfg.method.topology_patterns)  # refused before any work
        self._graph, self._held_out = None, None

    @classmethod
    def prepare(cls, con) -> None:
        """The test set's queries exist before any draw, which leaves them out."""
        topology_qa.ensure_topology_questions(con)

    def verifier(self, name: str, policy, m, con):
        # The LLM verifier's prompt renders a chain (a query is not one): EoG keeps its own
        # deterministic verifier at every tier, including the paper presets' verifier='llm'.
        if name in ("", "structural", "llm"):
            return eog.TopologyVerifier()
        return super().verifier(name, policy, m, con)

    def draw(self, t: int) -> list[ChainView]:
        tr, m = self.trainer, self.trainer.cfg.method
        if self._graph is None:
            self._graph = topology.TopologyGraph.from_store(tr.con)
            self._held_out = eog.held_out_queries(tr.con, tr.titles)  # the test set's queries
        queries = eog.draw_queries(self._graph, self.patterns, m.chains_per_round, tr.seed_for(t, 1),
                                   m.topology_max_answers, self._held_out)
        return eog.topology_views(tr.con, queries, tr.titles, self._graph)

    def prompts(self, tasks: list[ChainView], m: int) -> list[str]:
        return eog.topology_prompts(self.trainer.policy.chat_prompt, tasks, m, self.trainer.cfg.method.topology_prompt)

    def choices(self, tasks: list[ChainView], m: int):
        return eog.topology_choices(tasks, m)

    def gate(self, task: ChainView, candidates: list) -> list:
        m = self.trainer.cfg.method
        return eog.topology_gate(task, candidates, self.trainer.verifier, m.gate_threshold, m.admit_top_k,
                                 m.gate_aggregation)

    def slot(self, task: ChainView, cand: Candidate) -> Slot:
        # a query's slot is scored against its complete answer set
        return Slot(cand.verdict.question, task.answer_titles, task.hops, "generated", task, cand)

    def metrics(self, tasks: list[ChainTask]) -> dict:
        return eog.curriculum_metrics(tasks)  # Fig. 7's per-topology counts
