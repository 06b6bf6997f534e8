"""``hrlsched report DIR``: one self-contained HTML page of a run, a
comparison, an evaluation or an experiment directory, with its tables, its
plots embedded, its config, the command that made it, its seeds and the
versions of hrlsched that made and rendered it.

``render`` tells the kind of a folder by its files and writes the page;
``page`` is the HTML (no request allowed); ``files`` reads a folder's files;
``figures`` draws the plots a folder lacks; ``markdown`` turns a command's
markdown into HTML; one module per kind of folder: ``run``, ``comparison``,
``evaluation``, ``experiment``."""
