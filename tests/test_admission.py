"""A ranker cap's admission and a request's call budget, on the real :class:`Meter`.

Admission waits on a :class:`~permsc_integrations._calls.turn.Turn`, the one cross-loop wait
the limiter and the breaker use too: a request waiting on one event loop is woken by a hold
closed on another thread's loop. The budget (``max_calls``) has one count of refusals, whoever
asks (a call, a batch's other prompts, the room left for a batch)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from permsc_integrations._calls.caps import SpendingCap
from permsc_integrations._calls.spending import Meter, charged
from permsc_integrations.errors import BudgetSpentError, SpendingCapError

pytestmark = pytest.mark.timeout(20)


def no_tokens() -> tuple[int, int]:
    return (0, 0)


def test_a_request_waiting_for_room_is_woken_by_a_hold_closed_on_another_loop(
    wait_until,
) -> None:
    meter = Meter(SpendingCap(calls=4), "ranker")
    first = asyncio.run(meter.admission.admit((3, 3), no_tokens))  # this thread's own loop
    admitted: list[object] = []

    def second() -> None:  # another thread, another loop: 3 + 3 > 4, so it waits
        admitted.append(asyncio.run(meter.admission.admit((3, 3), no_tokens)))

    thread = threading.Thread(target=second)
    thread.start()
    wait_until(lambda: meter.admission.waiting == 1)
    assert admitted == []
    first.close()  # what it held goes back: the waiter's turn ends on its loop
    thread.join(timeout=10)
    assert not thread.is_alive() and len(admitted) == 1
    assert meter.admission.waiting == 0 and meter.spent.calls == 0  # held, nothing spent


def test_a_request_that_can_never_fit_is_refused_with_nothing_spent() -> None:
    meter = Meter(SpendingCap(calls=4), "ranker")
    with pytest.raises(SpendingCapError) as refused:
        asyncio.run(meter.admission.admit((5, 5), no_tokens))
    assert refused.value.needed == 5 and meter.spent.calls == 0
    assert meter.admission.waiting == 0


def test_a_hold_pays_for_its_calls_and_gives_back_what_it_did_not_use() -> None:
    meter = Meter(SpendingCap(calls=4), "ranker")
    hold = asyncio.run(meter.admission.admit((3, 3), no_tokens))
    with charged([hold], 8):
        pass
    assert hold.left.calls == 2 and meter.committed().calls == 3  # 1 spent + 2 held
    hold.close()
    assert meter.committed().calls == 1 and meter.admission.held().calls == 0


def test_every_refusal_of_the_budget_is_counted_once_by_the_meter() -> None:
    meter = Meter(None, "request", budget=3)
    meter.take(2)
    assert meter.room(1) == 1 and meter.refused == 0  # the budget pays for it: no refusal
    assert meter.room(4) == 1 and meter.refused == 1  # a batch cut to the room left
    with pytest.raises(BudgetSpentError):
        meter.take(2)  # a batch's other prompts: all or none
    assert meter.refused == 2 and meter.spent.calls == 2
    with charged([meter], 8):
        pass
    with pytest.raises(BudgetSpentError), charged([meter], 8):
        pass  # pragma: no cover (refused before it is sent)
    assert meter.refused == 3 and meter.spent.calls == 3


def test_without_a_budget_nothing_is_refused() -> None:
    meter = Meter(None, "request")
    meter.take(1000)
    assert meter.room(50) == 50 and meter.refused == 0
