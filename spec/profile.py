"""Profiles: how strictly a trace is judged, chosen in its header (spec/trace.md, "Header").

The model was first written for one bookie, bkref's in-process one, whose acks arrive only
when the test forces the journal and whose whole state the harness can see. A trace of any
other bookie, recorded through the adapter protocol (spec/adapter.md), differs in three ways,
each a field of :class:`Profile`:

- ``acks``, how acks may arrive:
  - ``in_process``: bkref's in-process schedule; only a journal force or a clean shutdown
    completes acks, and it completes every pending one (the harness drives the group commit);
  - ``async``: a bookie that commits on its own threads: an add or a fence may be answered in
    its own response or by a completion at any later step, in any order, in groups of any
    size; from the step it is acknowledged it must survive every crash.
- ``state``, how much of the abstract state (spec/state.py) the trace's states are judged on:
  - ``full``: all of it (entry logs, marks, ledgers, deletions);
  - ``protocol``: what a client can learn through the protocol only (every live ledger's last
    entry and fence, the deleted ledgers), for a bookie whose files are laid out its own way;
  - ``none``: no state is compared, only answers and acks.
- ``answers``, which answer a bookie may give where BookKeeper and bkref legitimately differ
  (docs/model.md, "Profiles"):
  - ``bkref``: bkref's choices;
  - ``bookkeeper``: BookKeeper's choices;
  - ``either``: either (for a bookie that follows neither exactly).

A version 1 trace has no profile: it is judged with :data:`DEFAULT_PROFILE`, the in-process
harness's own.
"""

from __future__ import annotations

import attrs

ACK_PROFILES = ("in_process", "async")
STATE_PROFILES = ("full", "protocol", "none")
ANSWER_PROFILES = ("bkref", "bookkeeper", "either")


@attrs.frozen
class Profile:
    """See the module docstring."""

    acks: str = attrs.field(default="in_process", validator=attrs.validators.in_(ACK_PROFILES))
    state: str = attrs.field(default="full", validator=attrs.validators.in_(STATE_PROFILES))
    answers: str = attrs.field(default="bkref", validator=attrs.validators.in_(ANSWER_PROFILES))

    def describe(self) -> str:
        return f"acks {self.acks}, state {self.state}, answers {self.answers}"


#: The in-process harness's profile, and a version 1 trace's.
DEFAULT_PROFILE = Profile()
#: The profile of a bookie recorded through the adapter protocol, whose files bkref can read
#: (bkref's own adapter, or a BookKeeper-compatible bookie).
ADAPTER_PROFILE = Profile(acks="async", state="full", answers="either")

#: The choices of each field, for the codec and the command line.
CHOICES: dict[str, tuple[str, ...]] = {
    "acks": ACK_PROFILES,
    "state": STATE_PROFILES,
    "answers": ANSWER_PROFILES,
}
