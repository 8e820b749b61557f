"""Warm sandboxes, leased one per notebook session and kept for it (sticky), so variables persist.

Sandboxes are started ahead of need; a lease takes a warm one (pinged first), and the pool
refills in the background. A session whose sandbox broke or was reset gets a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from pydantic import BaseModel

from ..errors import SandboxError
from .backend import Sandbox

SandboxFactory = Callable[[], Awaitable[Sandbox]]


class PoolStatus(BaseModel):
    size: int
    warm: int
    leased: int
    starting: int
    ready_ms: float | None = None
    last_error: str | None = None


class Pool:
    def __init__(self, factory: SandboxFactory, size: int) -> None:
        self._factory = factory
        self.size = size
        self._idle: list[Sandbox] = []
        self._leases: dict[str, Sandbox] = {}
        self._starting: set[asyncio.Task[None]] = set()
        self._created = time.perf_counter()
        self._ready_ms: float | None = None
        self._last_error: str | None = None
        self._closed = False
        self._lock = asyncio.Lock()

    def start(self) -> None:
        """Begin warming ``size`` sandboxes; returns at once."""
        self._created = time.perf_counter()
        self._refill()

    async def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until the pool holds ``size`` warm sandboxes (or the attempt to start them ended)."""
        deadline = time.perf_counter() + timeout
        while self._starting and time.perf_counter() < deadline:
            await asyncio.wait(set(self._starting), timeout=deadline - time.perf_counter())

    def _refill(self) -> None:
        if self._closed:
            return
        missing = self.size - len(self._idle) - len(self._starting)
        for _ in range(max(0, missing)):
            task = asyncio.get_running_loop().create_task(self._warm_one())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _warm_one(self) -> None:
        try:
            sandbox = await self._factory()
            await sandbox.start()
        except (SandboxError, OSError) as exc:
            self._last_error = str(exc)
            return
        if self._closed:
            await sandbox.close()
            return
        self._idle.append(sandbox)
        if self._ready_ms is None and len(self._idle) >= self.size:
            self._ready_ms = (time.perf_counter() - self._created) * 1000

    async def lease(self, session: str) -> Sandbox:
        """The session's sandbox: its own if alive, else a warm one, else a new one."""
        if self._closed:
            raise SandboxError("The sandbox pool is closed.")
        sandbox = self._leases.get(session)
        if sandbox is not None and sandbox.alive:
            return sandbox
        async with self._lock:
            sandbox = self._leases.get(session)
            if sandbox is not None and sandbox.alive:
                return sandbox
            if sandbox is not None:
                await self.discard(session)
            sandbox = await self._take()
            self._leases[session] = sandbox
            self._refill()
            return sandbox

    async def _take(self) -> Sandbox:
        while self._idle:
            sandbox = self._idle.pop(0)
            if await sandbox.ping():
                return sandbox
            await sandbox.close()
        try:
            sandbox = await self._factory()
            await sandbox.start()
        except SandboxError as exc:
            self._last_error = str(exc)
            raise
        return sandbox

    def leased(self, session: str) -> Sandbox | None:
        return self._leases.get(session)

    async def discard(self, session: str) -> None:
        """Close the session's sandbox; its next lease starts from a warm one."""
        sandbox = self._leases.pop(session, None)
        if sandbox is not None:
            await sandbox.close()
        self._refill()

    def status(self) -> PoolStatus:
        return PoolStatus(
            size=self.size,
            warm=len(self._idle),
            leased=len(self._leases),
            starting=len(self._starting),
            ready_ms=self._ready_ms,
            last_error=self._last_error,
        )

    async def close(self) -> None:
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        for task in list(self._starting):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        sandboxes = [*self._idle, *self._leases.values()]
        self._idle.clear()
        self._leases.clear()
        await asyncio.gather(*(s.close() for s in sandboxes), return_exceptions=True)
