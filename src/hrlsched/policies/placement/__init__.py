"""Level-2 placement policies (which GPUs and sockets), and the occupancy
bookkeeping and incremental frame they share. Placements that belong to one
system (Optimus, Tiresias) live in that system's module."""
