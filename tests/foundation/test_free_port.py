"""`free_port`: a port a server binds later is drawn below the kernel's ephemeral range (where bind(0) and
outgoing connections take theirs), is free when handed out, and is never handed out twice by one process."""

from __future__ import annotations

import socket

from wingsmith.local import postgres
from wingsmith.local.postgres import free_port


def test_ports_are_free_below_the_ephemeral_range_and_never_given_twice():
    first_ephemeral = postgres._first_ephemeral_port()
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)
    assert all(postgres._LOWEST_PORT <= p < first_ephemeral for p in ports)
    with socket.socket() as s:  # free when handed out: a server can bind it
        s.bind(("127.0.0.1", ports[-1]))


def test_a_port_in_use_is_not_handed_out(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        other = free_port()
        asked = iter([taken, other])

        class Picks:  # the held port drawn first, then a free one
            def choice(self, _candidates):
                return next(asked)
        monkeypatch.setattr(postgres.random, "SystemRandom", Picks)
        postgres._GIVEN.discard(other)
        assert free_port() == other
