"""Offline fitting and validation of the performance models against public
measurements (DL2, Pollux, DeepShare, Gavel). The simulator never imports
this package: it reads the fitted figures from the catalogue and
``perf/interference.yaml``."""
