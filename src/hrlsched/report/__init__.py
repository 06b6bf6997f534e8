"""``hrlsched report DIR``: one self-contained HTML page of a run, a
comparison, an evaluation or an experiment directory (``render``), with its
tables, its plots embedded, its config, the command that made it, its seeds
and the versions of hrlsched that made and rendered it. ``page`` writes the
HTML; one module per kind of directory reads it."""
