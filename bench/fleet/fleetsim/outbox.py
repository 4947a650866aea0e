"""Messages a simulated agent sent but the controller has not acknowledged yet.

The delivery contract (agent.proto): every message but a heartbeat carries a sequence
number increasing per agent, and the agent keeps each until an `Ack{through_seq}` covers
it. Acknowledgements are cumulative, so what is outstanding is always the contiguous
range `first_unacked .. next_seq - 1`; the outbox keeps only each message's send time in
a ring (8 bytes a message), which is what ack latency needs. A simulated agent never
reconnects, so it never resends and needs no payload. When `capacity` messages are
outstanding (a controller that never acks, such as today's), the oldest is dropped and
counted: a real agent would spool it to disk.
"""

from __future__ import annotations

from array import array

DEFAULT_CAPACITY = 1000


class Outbox:
    def __init__(self, capacity: int = DEFAULT_CAPACITY):
        if capacity < 1:
            raise ValueError("an outbox holds at least one message")
        self._capacity = capacity
        self._sent_at_s = array("d", bytes(8 * capacity))
        self._first_unacked = 1
        self._next_seq = 1
        self.dropped = 0
        # Acks naming a sequence number this agent never sent: a controller bug, counted.
        self.acks_beyond_sent = 0

    @property
    def outstanding(self) -> int:
        return self._next_seq - self._first_unacked

    def add(self, now_s: float) -> int:
        """The sequence number of a message sent now."""
        if self.outstanding == self._capacity:
            self._first_unacked += 1
            self.dropped += 1
        seq = self._next_seq
        self._sent_at_s[seq % self._capacity] = now_s
        self._next_seq += 1
        return seq

    def ack(self, through_seq: int, now_s: float) -> list[float]:
        """Forgets every message up to `through_seq`; returns their ack latencies, seconds
        (none for messages already dropped or acknowledged)."""
        if through_seq >= self._next_seq:
            self.acks_beyond_sent += 1
            through_seq = self._next_seq - 1
        latencies = [
            now_s - self._sent_at_s[seq % self._capacity] for seq in range(self._first_unacked, through_seq + 1)
        ]
        self._first_unacked = max(self._first_unacked, through_seq + 1)
        return latencies
