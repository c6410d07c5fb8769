"""Every speed benchmark of the workbench, one module a ``workbench bench NAME`` (``walks``,
``retrieval``, ``rollout``, ``loop``, ``server``, ``topology``, ``drfree``, ``gpu``, ``kgsearch``;
``mmap`` runs as ``python -m workbench.bench.mmap``), the model shapes they and ``workbench plan``
read (:mod:`workbench.bench.shapes`) and the store they measure (:mod:`workbench.bench.store`).

A benchmark times the library's own code (a rollout, a round, the trainer's update step), never
a copy of it, so the figure cannot drift from what it measures.
"""
