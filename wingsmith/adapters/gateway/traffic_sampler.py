"""The plane's traffic sampler: every few seconds it reads each gateway's counters (/metrics) and stores
them in Postgres (wingsmith.adapters.store.traffic_samples), keeping the last hour or so; the console draws the
endpoint and workload traffic charts from what it stored (wingsmith.adapters.gateway.traffic_history).

It runs inside the API process, and however many API replicas run, one samples: the one holding a
Postgres advisory lock on a connection of its own. The lock goes with its connection, so a replica that
dies (or loses its database) hands the sampling on within one period to another replica, which finds
the lock free. Why not a Temporal workflow: a reading every 10 s would write about a dozen history
events each time (activity scheduled, started, completed; timer started, fired; workflow tasks), some
4,000 an hour per plane, for data that needs no durability of its own: the counters are cumulative, so
a missed reading only widens one interval. docs/console.md says the same.

The tick's time is the database's clock, so readings stay in order when the sampling moves between
replicas whose clocks differ.

Each gateway replica is read on its own: counters are per process, and behind one Service address
successive readings would come from different replicas and look like resets. So the sampler reads fixed
URLs (`traffic_gateway_urls`) and, each period, resolves the names in `traffic_gateway_dns` (a headless
Service: one address per ready pod) to every address, each read as its own gateway. A replica's counters
are differenced against its own previous reading only, and the charts add the replicas up.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from datetime import datetime
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

from wingsmith.adapters.gateway.traffic_reader import READ_TIMEOUT_SECONDS, GatewayUnreadable, read_all_counters
from wingsmith.adapters.http_tls import default_tls
from wingsmith.adapters.logs import get_logger
from wingsmith.adapters.store.traffic_samples import Connection, record_samples
from wingsmith.domain.config import Settings
from wingsmith.domain.gateway.traffic import BackendCounters

# Any number works as long as every API replica uses the same one (0x57... is "WTRF": Wingsmith traffic).
SAMPLER_LOCK = 0x57545246
UNROUTED = "unrouted"  # the gateway's label for model names it does not route: not an endpoint's traffic

log = get_logger("wingsmith.traffic")

Resolver = Callable[[str, int], Awaitable[list[str]]]


async def addresses_of(host: str, port: int) -> list[str]:
    """Every address a name resolves to (a headless Service's name: one per ready pod), through the
    system's resolver, so /etc/hosts and the cluster's DNS answer as they do for any client."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def replica_url(url: str, address: str) -> str:
    """`url` with its host replaced by one of the addresses it resolved to (IPv6 in brackets)."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


class TrafficSampler:
    def __init__(self, pool: asyncpg.Pool, gateways: list[str], *, admin_token_ref: str | None = None,
                 every_seconds: float = 10.0, keep_seconds: float = 3900.0, resolved: list[str] | None = None,
                 resolve: Resolver = addresses_of) -> None:
        self.pool = pool
        self.gateways = [g.rstrip("/") for g in gateways]
        self.resolved = list(resolved or [])  # URLs whose host names every replica, resolved each period
        self.resolve = resolve
        self.admin_token_ref = admin_token_ref
        self.every_seconds = every_seconds
        self.keep_seconds = keep_seconds
        self.leading = False
        self.readings = 0  # ticks written while leading (tests and logs read it)
        self._unreadable: dict[str, str] = {}  # gateway → what it last said, so a down gateway logs once
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name="traffic-sampler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run(self) -> None:
        """Forever: wait for the lock, then sample while holding it; a lost connection starts over."""
        async with httpx.AsyncClient(trust_env=False, verify=default_tls(trust_env=False)) as http:
            while True:
                try:
                    await self._lead(http)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                    if self.leading:
                        log.warning("traffic sampling stopped; trying again", error=str(exc))
                    self.leading = False
                await asyncio.sleep(self.every_seconds)

    async def _lead(self, http: httpx.AsyncClient) -> None:
        async with self.pool.acquire() as conn:
            if not await conn.fetchval("select pg_try_advisory_lock($1)", SAMPLER_LOCK):
                return  # another replica samples
            try:
                self.leading = True
                log.info("sampling the gateways' traffic", gateways=self.gateways, resolved=self.resolved,
                         every_seconds=self.every_seconds)
                while True:
                    await self.sample(conn, http)
                    await asyncio.sleep(self.every_seconds)
            finally:
                self.leading = False
                if not conn.is_closed():
                    with contextlib.suppress(asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
                        await asyncio.shield(conn.execute("select pg_advisory_unlock($1)", SAMPLER_LOCK))

    async def sample(self, conn: Connection, http: httpx.AsyncClient) -> datetime:
        """One reading of every gateway, stored under one time (the database's)."""
        gateways = self.gateways + [u for found in await asyncio.gather(*map(self._replicas, self.resolved))
                                    for u in found if u not in self.gateways]
        at: datetime = await conn.fetchval("select clock_timestamp()")
        read = await asyncio.gather(*(self._read(http, g) for g in gateways))
        for gateway, counters in zip(gateways, read, strict=True):
            if counters is not None:
                await record_samples(conn, at=at, gateway=gateway, counters=counters, keep_seconds=self.keep_seconds)
        self.readings += 1
        return at

    async def _replicas(self, url: str) -> list[str]:
        """The URL of every replica behind `url`'s name now; none while the name does not resolve (a gap)."""
        parts = urlsplit(url)
        try:
            # Bounded like a read: a resolver that does not answer must not stall every other reading.
            found = await asyncio.wait_for(
                self.resolve(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)),
                READ_TIMEOUT_SECONDS)
        except OSError as exc:  # TimeoutError and socket.gaierror among them
            if self._unreadable.get(url) != str(exc):
                log.warning("a gateway name did not resolve; its replicas' traffic has a gap", url=url,
                            error=str(exc))
            self._unreadable[url] = str(exc)
            return []
        if self._unreadable.pop(url, None) is not None:
            log.info("a gateway name resolves again", url=url, replicas=len(found))
        return [replica_url(url, a) for a in found]

    async def _read(self, http: httpx.AsyncClient, gateway: str) -> dict[tuple[str, str], BackendCounters] | None:
        try:
            counters = await read_all_counters(http, gateway, self.admin_token_ref)
        except GatewayUnreadable as exc:
            if self._unreadable.get(gateway) != str(exc):
                log.warning("a gateway's counters could not be read; its traffic has a gap", error=str(exc))
            self._unreadable[gateway] = str(exc)
            return None
        if self._unreadable.pop(gateway, None) is not None:
            log.info("a gateway's counters are read again", gateway=gateway)
        return {key: c for key, c in counters.items() if key[0] != UNROUTED}


def sampler_for(pool: asyncpg.Pool | None, settings: Settings) -> TrafficSampler | None:
    """The sampler an API process runs (started by its lifespan), or None: no database, sampling off
    (`traffic_sample_seconds` 0), or no gateway (URL or name to resolve) whose counters it can read."""
    if pool is None or settings.traffic_sample_seconds <= 0 or not (settings.traffic_gateways
                                                                    or settings.traffic_gateway_dns):
        return None
    return TrafficSampler(pool, settings.traffic_gateways, admin_token_ref=settings.gateway_admin_token_ref,
                          every_seconds=settings.traffic_sample_seconds, keep_seconds=settings.traffic_keep_seconds,
                          resolved=settings.traffic_gateway_dns)
