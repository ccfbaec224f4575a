"""Shards on Ray: one long-lived actor per shard, on the node that holds the shard file.

The engine keeps planning and merging (plan.py, engine.py); only where a shard's part runs changes.
Actor i asks for the custom resource `grepseek_shard_<i>`, so it is placed on the node started with
that resource (`ray start --resources='{"grepseek_shard_0": 1}'`), and runs the shard's part with the
same runner, policy and limits as a local shard (runner.run_pipeline on its local copy of the shard
file, which must sit at the manifest's path and match its size and mtime). Actors are named after
the manifest's sha256 and shard, detached, so every driver (CLI, eval, each GRPO rollout process)
reuses them. A cancelled shard (a head plan that has its lines) is told to kill its chain; a shard
that does not answer by the deadline is a timeout, as a local one; an actor error sends the command
to one sequential run on the driver, as any shard the engine cannot explain.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

from grepseek_lib.errors import UserError
from grepseek_lib.shell.limits import Limits
from grepseek_lib.shell.runner import run_pipeline
from grepseek_lib.shell.shards import Manifest
from grepseek_lib.shell.types import Pipeline, RunResult

NAMESPACE = "grepseek"
#: Concurrent calls per actor: one run plus its cancel (and one queued run of another driver).
ACTOR_CONCURRENCY = 4
_TOKENS = itertools.count()


def shard_resource(index: int) -> str:
    """The custom resource that places shard `index`'s actor."""
    return f"grepseek_shard_{index}"


class ShardWorker:
    """The actor's body (plain class, wrapped by ray.remote lazily): runs parts on one shard file."""

    def __init__(self, path: str, size: int, mtime_ns: int) -> None:
        stat = Path(path).stat()
        if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns):
            raise RuntimeError(f"shard {path} on this node differs from the manifest; copy the shards again")
        self.path = Path(path)
        self.events: dict[int, threading.Event] = {}
        self.cancelled: set[int] = set()
        self.lock = threading.Lock()

    def run(self, token: int, pipeline: Pipeline, timeout: float, cap: int | None, limits: Limits) -> RunResult | None:
        event = threading.Event()
        with self.lock:
            if token in self.cancelled:
                self.cancelled.discard(token)
                return None
            self.events[token] = event
        try:
            return run_pipeline(pipeline, self.path, timeout=max(timeout, 0.001), max_output_bytes=cap,
                                limits=limits, cancel=event)
        finally:
            with self.lock:
                self.events.pop(token, None)

    def cancel(self, token: int) -> None:
        with self.lock:
            event = self.events.get(token)
            if event is None:
                self.cancelled.add(token)
            else:
                event.set()

    def ping(self) -> str:
        return str(self.path)


class _RemoteCancel(threading.Event):
    """An Event whose set() also tells the actor to kill the chain of this run."""

    def __init__(self, actor, token: int) -> None:
        super().__init__()
        self.actor, self.token = actor, token

    def set(self) -> None:
        if not self.is_set():
            super().set()
            self.actor.cancel.remote(self.token)


@dataclass
class RemoteRun:
    future: Future
    cancel: threading.Event


class RayShards:
    """The actors of one manifest's shards, and how the engine starts a part on one of them."""

    def __init__(self, manifest: Manifest, address: str | None, limits: Limits) -> None:
        import ray  # deferred: heavy, and only needed with --executor ray

        if not ray.is_initialized():
            ray.init(address=address, namespace=NAMESPACE, ignore_reinit_error=True, log_to_driver=False,
                     include_dashboard=False)
        offered = ray.cluster_resources()
        missing = [shard_resource(i) for i in range(len(manifest.shards)) if offered.get(shard_resource(i), 0) <= 0]
        if missing:
            raise UserError(f"no Ray node offers {', '.join(missing)}: start the node holding each shard with "
                            f"`ray start ... --resources '{{\"{missing[0]}\": 1}}'`")
        remote_cls = ray.remote(ShardWorker)
        self.limits = limits
        self.actors = []
        where = hashlib.sha256(str(manifest.directory.resolve()).encode()).hexdigest()[:8]
        for i, info in enumerate(manifest.shards):
            name = f"grepseek-{manifest.sha256[:16]}-{where}-{info.file}-{info.mtime_ns}"
            actor = remote_cls.options(
                name=name, namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
                resources={shard_resource(i): 0.001}, max_concurrency=ACTOR_CONCURRENCY, num_cpus=0,
            ).remote(str(manifest.shard_path(i)), info.size, info.mtime_ns)
            self.actors.append(actor)

    def start(self, index: int, pipeline: Pipeline, deadline: float, cap: int | None) -> RemoteRun:
        token = next(_TOKENS)
        actor = self.actors[index]
        ref = actor.run.remote(token, pipeline, deadline - time.monotonic(), cap, self.limits)
        return RemoteRun(ref.future(), _RemoteCancel(actor, token))

    def run_first(self, pipeline: Pipeline, deadline: float, cap: int | None, grace: float,
                  start_rest: Callable[[], None]) -> RemoteRun:
        """Shard 0's part; the others are started only if it is still busy after `grace` seconds."""
        run = self.start(0, pipeline, deadline, cap)
        try:
            run.future.result(timeout=grace)
        except Exception:  # still running (or failed: the caller reads the error from the future)
            if not run.future.done():
                start_rest()
        return run
