"""`free_port`: a port a server binds later is drawn below the kernel's ephemeral range (where bind(0) and
outgoing connections take theirs), is free when handed out, and is never handed out twice by one process."""

from __future__ import annotations

import socket

from wingsmith.local import ports
from wingsmith.local.ports import free_port


def test_ports_are_free_below_the_ephemeral_range_and_never_given_twice():
    first_ephemeral = ports._first_ephemeral_port()
    given = [free_port() for _ in range(500)]
    assert len(set(given)) == len(given)
    assert all(ports._LOWEST_PORT <= p < first_ephemeral for p in given)
    with socket.socket() as s:  # free when handed out: a server can bind it
        s.bind(("127.0.0.1", given[-1]))


def test_a_port_in_use_is_not_handed_out(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        other = free_port()
        asked = iter([taken, other])

        class Picks:  # the held port drawn first, then a free one
            def choice(self, _candidates):
                return next(asked)
        monkeypatch.setattr(ports.random, "SystemRandom", Picks)
        ports._GIVEN.discard(other)
        assert free_port() == other
