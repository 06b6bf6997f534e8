"""E-LAS (Sultana et al., "E-LAS: Design and Analysis of Completion-Time
Agnostic Scheduling for Distributed Deep Learning Cluster", ICPP'20).

Rules followed: no knowledge of job durations; priority to the job with the
least attained service, where service is measured by each job's real-time
epoch progress rate (epochs completed per second since it was submitted),
so jobs that progress slowly are served first; preemptive, re-evaluated
every round; jobs get their requested GPUs and are started greedily in
priority order. Epochs are counted with per-model dataset sizes
(``EPOCH_SAMPLES``, the training sets of the models' usual benchmarks).
Departure: the paper's priority also discretises into queues; we sort by
the rate directly (ties by arrival)."""

from __future__ import annotations

import numpy as np

from hrlsched.policies.base import Allocation, AllocationPolicy
from hrlsched.policies.common import greedy_by_order
from hrlsched.sim.view import ClusterView

EPOCH_SAMPLES: dict[str, float] = {
    "resnet-50": 1.28e6, "vgg-16": 1.28e6, "inception-bn": 1.28e6, "imagenet": 1.28e6,
    "resnext-110": 5e4, "cifar10": 5e4, "seq2seq": 4.5e6, "cnn-text-classification": 1.07e4,
    "dssm": 1e6, "wlm": 2.66e4, "bert": 8.8e4, "deepspeech2": 2.8e5, "ncf": 2e7, "yolov3": 1.17e5,
}


class ELAS(AllocationPolicy):
    name = "elas"
    event_driven = False
    default_placement = "pack"

    def allocate(self, view: ClusterView) -> dict[int, Allocation]:
        epochs = view.progress / np.array([EPOCH_SAMPLES.get(j.model, 1e5) for j in view.jobs])
        rate = epochs / np.maximum(view.age_s(), 1.0)
        arrival = np.array([j.arrival_s for j in view.jobs])
        return greedy_by_order(view, np.lexsort((view.job_ids, arrival, rate)))
