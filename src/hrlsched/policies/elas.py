"""E-LAS (Sultana et al., "E-LAS: Design and Analysis of Completion-Time
Agnostic Scheduling for Distributed Deep Learning Cluster", ICPP'20).

Rules followed: no knowledge of job durations; priority to the job with the
least attained service, where service is measured by each job's real-time
epoch progress rate (epochs completed per second since it was submitted),
so jobs that progress slowly are served first; preemptive, re-evaluated
every round; jobs get their requested GPUs and are started greedily in
priority order. Epochs are counted with per-model dataset sizes
(``EPOCH_SAMPLES``, the training sets of the models' usual benchmarks).
Departures: the paper's priority also discretises into queues; we sort by
the rate directly (ties by arrival), and, to keep the rate's small changes
from preempting jobs every round, a job that (re)started less than
``quantum_s`` ago keeps its GPUs (a scheduling quantum)."""

from __future__ import annotations

import numpy as np

from hrlsched.cluster.topology import Topology
from hrlsched.contract import ClusterView
from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.common import greedy_by_order

EPOCH_SAMPLES: dict[str, float] = {
    "resnet-50": 1.28e6, "vgg-16": 1.28e6, "inception-bn": 1.28e6, "imagenet": 1.28e6,
    "resnext-110": 5e4, "cifar10": 5e4, "seq2seq": 4.5e6, "cnn-text-classification": 1.07e4,
    "dssm": 1e6, "wlm": 2.66e4, "bert": 8.8e4, "deepspeech2": 2.8e5, "ncf": 2e7, "yolov3": 1.17e5,
}


class ELAS(AllocationPolicy):
    name = "elas"
    event_driven = False
    default_placement = "pack"

    def __init__(self, quantum_s: float = 600.0) -> None:
        self.quantum_s = quantum_s

    def reset(self, topology: Topology, rng: np.random.Generator) -> None:
        self.started: dict[int, float] = {}

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        running = view.running
        for jid, r in zip(view.job_ids.tolist(), running):
            if not r:
                self.started.pop(jid, None)
            else:
                self.started.setdefault(jid, view.time_s)
        epochs = view.progress / np.array([EPOCH_SAMPLES.get(j.model, 1e5) for j in view.jobs])
        rate = epochs / np.maximum(view.age_s(), 1.0)
        arrival = np.array([j.arrival_s for j in view.jobs])
        in_quantum = np.array([r and view.time_s - self.started.get(int(j), view.time_s) < self.quantum_s
                               for j, r in zip(view.job_ids, running)])
        return greedy_by_order(view, np.lexsort((view.job_ids, arrival, rate, ~in_quantum)))
