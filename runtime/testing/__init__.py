"""Test helpers: scripted and recorded models, and replaying recorded sessions.

``replay_recording`` runs a recorded session (``evs export``) against today's code and raises
``ReplayDivergence`` naming the first event that differs.
"""

from runtime._exceptions import RecordingError
from runtime._scripted import ScriptedModel, ScriptStep
from runtime.testing._replay import (
    RecordedModel,
    Recording,
    ReplayDivergence,
    ReplayResult,
    dump_recording,
    load_recording,
    replay_recording,
)

__all__ = [
    "RecordedModel",
    "Recording",
    "RecordingError",
    "ReplayDivergence",
    "ReplayResult",
    "ScriptStep",
    "ScriptedModel",
    "dump_recording",
    "load_recording",
    "replay_recording",
]
