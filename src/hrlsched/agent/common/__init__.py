"""What every learned scheduler of the project shares (the ``hrl`` agent in
``hrlsched.agent``, its rivals DL2 and Harmony in ``hrlsched.rivals``), as
Stable-Baselines3 keeps its common code apart from each algorithm:
checkpoints (``checkpoint``), returns and advantages (``returns``), the
training table (``logger``), the budgeted training loop (``loop``), masked
distributions (``distributions``), MLPs (``mlp``), training seeds
(``seeds``) and a training run's directory (``training_run``).

Nothing is imported here, so that a torch-free module (``seeds``,
``training_run``, ``logger``, ``loop``) costs no torch import."""
