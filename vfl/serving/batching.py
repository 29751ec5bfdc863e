"""Micro-batching: concurrent requests gathered into rounds, so that packed ciphertexts are filled.

A request's ids wait at most ``wait`` seconds for others (or until ``max_batch``
ids are waiting), then go out in one round with them; at most ``max_rounds``
rounds run at once (in threads of the batcher's own pool: the rounds' own work is
the crypto and the waiting for peers; nothing else the service runs in threads,
such as a reload, can take their places), and a request larger than ``max_batch``
spans several rounds.
A round's deadline is the earliest of its requests'.  What waits is bounded
(``max_queue`` ids): beyond it a request is refused at once rather than queued
past any deadline.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from collections import deque
from dataclasses import dataclass, field

from vfl.serving.label import RoundError


@dataclass
class _Request:
    ids: list
    inline: list
    deadline: float
    future: asyncio.Future
    answers: list = field(default_factory=list)
    taken: int = 0          # ids handed to rounds so far
    open: int = 0           # rounds of this request still running
    version: str | None = None

    def __post_init__(self):
        self.answers = [None] * len(self.ids)


class MicroBatcher:
    """Gathers requests into rounds of ``run(ids, inline, deadline) -> (version, answers)``.

    Parameters
    ----------
    run : callable
        One round, run in a thread (:meth:`vfl.serving.label.LabelService.score`).
    max_batch : int
        Ids per round at most.
    wait : float
        Seconds the first waiting id waits for others.
    max_rounds : int
        Rounds running at once.
    max_queue : int
        Ids waiting at most.
    metrics : vfl.serving.metrics.Metrics, optional
    """

    def __init__(self, run, max_batch: int, wait: float, max_rounds: int, max_queue: int, metrics=None):
        self.run, self.max_batch, self.wait = run, max_batch, wait
        self.max_queue, self.metrics = max_queue, metrics
        self._queue: deque[_Request] = deque()
        self._waiting = 0
        self._slots = asyncio.Semaphore(max_rounds)
        self._pool = ThreadPoolExecutor(max_rounds, thread_name_prefix="vfl-round")
        self._arrived = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._gather())

    async def submit(self, ids: list, inline: list, deadline: float) -> tuple[str, list]:
        """The version used and one answer per id; a :class:`RoundError` if a round of it failed."""
        if self._waiting + len(ids) > self.max_queue:
            raise RoundError(f"the service is overloaded: {self._waiting} ids are waiting (at most "
                             f"{self.max_queue}); retry shortly", None, 503, "overloaded")
        request = _Request(ids, inline, deadline, asyncio.get_running_loop().create_future())
        self._queue.append(request)
        self._count(len(ids))
        self._arrived.set()
        return await request.future

    def _count(self, change: int) -> None:
        self._waiting += change
        if self.metrics is not None:
            self.metrics.queue.set(self._waiting)

    async def _gather(self) -> None:
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            while self._queue:
                first = time.monotonic()
                while self._waiting < self.max_batch and time.monotonic() - first < self.wait:
                    try:
                        await asyncio.wait_for(self._arrived.wait(), self.wait - (time.monotonic() - first))
                    except asyncio.TimeoutError:
                        break
                    self._arrived.clear()
                await self._slots.acquire()
                parts = self._take()
                if parts:
                    asyncio.get_running_loop().create_task(self._round(parts))
                else:
                    self._slots.release()

    def _take(self) -> list[tuple[_Request, int, int]]:
        """Up to ``max_batch`` waiting ids, as ``(request, start, stop)``; requests past their deadline fail."""
        parts, room, now = [], self.max_batch, time.monotonic()
        while self._queue and room:
            request = self._queue[0]
            if request.taken == 0 and request.deadline <= now:
                self._queue.popleft()
                self._count(-len(request.ids))
                if not request.future.done():
                    request.future.set_exception(RoundError("the request waited past its deadline before a round "
                                                            "could take it", None, 504, "deadline_exceeded"))
                continue
            start = request.taken
            stop = min(len(request.ids), start + room)
            parts.append((request, start, stop))
            request.taken, request.open = stop, request.open + 1
            room -= stop - start
            self._count(-(stop - start))
            if stop == len(request.ids):
                self._queue.popleft()
        return parts

    async def _round(self, parts) -> None:
        ids = [key for request, start, stop in parts for key in request.ids[start:stop]]
        inline = [row for request, start, stop in parts for row in request.inline[start:stop]]
        deadline = min(request.deadline for request, _, _ in parts)
        try:
            version, answers = await asyncio.get_running_loop().run_in_executor(self._pool, self.run, ids, inline,
                                                                               deadline)
            error = None
        except RoundError as exc:
            error = exc
        except Exception as exc:  # noqa: BLE001 - a round's unexpected failure is its requests' answer
            error = RoundError(f"internal error ({type(exc).__name__}: {exc})", None, 500, "internal_error")
        finally:
            self._slots.release()
        at = 0
        for request, start, stop in parts:
            request.open -= 1
            mine, at = slice(at, at + stop - start), at + stop - start
            if request.future.done():
                continue
            if error is not None:
                request.future.set_exception(error)
                continue
            request.answers[start:stop] = answers[mine]
            request.version = version
            if request.open == 0 and request.taken == len(request.ids):
                request.future.set_result((request.version, request.answers))

    async def close(self) -> None:
        self._task.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)
