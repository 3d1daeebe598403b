"""The collector and a long-lived process: what start-up built is kept out of every full collection."""

import gc


def freeze_startup_heap() -> None:
    """Modules, schemas, routes and the graph live as long as the process, yet a full collection walked all of
    them: 180,000 objects, a 100-300 ms pause of every request and run (bench §7). Frozen, a full collection
    walks only what requests and runs made since start-up."""
    gc.collect()
    gc.freeze()
