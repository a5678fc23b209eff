"""The budget's admission control as plain calls: worst cases, reservations, waiting for
requests in flight, refusals, settling (docs/gateway.md, "The budget")."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from flowerbox.sidecar.meter import Meter, Reservation
from flowerbox.sidecar.pricing import PriceTable

OPUS = "claude-opus-5-5"  # $4 in, $20 out, $8 a 1-hour cache write
pytestmark = pytest.mark.english  # the refusals' words, as docs/gateway.md quotes them


def meter(tmp_path: Path, budget: float | None = 1.0) -> Meter:
    return Meter(tmp_path / "usage.json", PriceTable(), budget=budget)


def test_the_worst_case_is_max_tokens_at_the_output_price_plus_the_input_at_the_dearest(
    tmp_path: Path,
) -> None:
    m = meter(tmp_path)
    assert m.worst_case(OPUS, max_tokens=1000, input_tokens=500) == pytest.approx(
        (1000 * 20 + 500 * 8) / 1e6
    )
    # A model the table does not know is priced as the dearest entry ($75 out, $30 1h write).
    assert m.worst_case(None, max_tokens=1000, input_tokens=0) == pytest.approx(0.075)
    # A long-prompt tier counts when it is the dearer one.
    haiku = m.worst_case("claude-haiku-5-5", max_tokens=0, input_tokens=1_000_000)
    assert haiku == pytest.approx(1.0)  # the >100k tier's $1 cache write, not $0.20


def test_requests_are_admitted_while_spent_plus_reserved_plus_theirs_fits(tmp_path: Path) -> None:
    m = meter(tmp_path)
    first = m.admit(0.6, wait=0)
    assert isinstance(first, Reservation)
    busy = m.admit(0.5, wait=0)  # 0.6 + 0.5 > 1 while the first is in flight
    assert busy == (
        "flowerbox gateway: this request could cost up to $0.50; the run's budget of $1.00 has"
        " $1.00 left, and $0.60 of it stayed reserved by requests in flight; raise it with"
        " --budget"
    )
    assert isinstance(m.admit(0.4, wait=0), Reservation)  # 0.6 + 0.4 fits exactly
    assert m.reserved == pytest.approx(1.0) and m.total == 0


def test_a_request_waits_for_one_in_flight_and_gets_in_when_it_settles_cheaper(
    tmp_path: Path,
) -> None:
    m = meter(tmp_path)
    first = m.admit(0.6, wait=0)
    assert isinstance(first, Reservation)
    outcome: list[Reservation | str] = []
    waiter = threading.Thread(target=lambda: outcome.append(m.admit(0.5, wait=10)))
    waiter.start()
    time.sleep(0.2)
    assert outcome == []  # still waiting
    m.add(OPUS, {"output_tokens": 15_000}, reservation=first)  # $0.30 spent, not $0.60
    waiter.join(timeout=5)
    assert len(outcome) == 1 and isinstance(outcome[0], Reservation)
    assert m.total == pytest.approx(0.3)


def test_a_request_that_cannot_fit_what_is_left_is_refused_at_once(tmp_path: Path) -> None:
    m = meter(tmp_path)
    first = m.admit(0.7, wait=0)
    assert isinstance(first, Reservation)
    m.add(OPUS, {"output_tokens": 35_000}, reservation=first)  # $0.70
    started = time.monotonic()
    refused = m.admit(0.5, wait=10)
    assert time.monotonic() - started < 1  # no point waiting: nothing in flight frees room
    assert refused == (
        "flowerbox gateway: this request could cost up to $0.50 and the run's budget of $1.00"
        " has $0.30 left ($0.70 used); raise it with --budget"
    )


def test_a_spent_budget_says_so(tmp_path: Path) -> None:
    m = meter(tmp_path, budget=0.01)
    m.add(OPUS, {"input_tokens": 10_000})  # $0.04, more than the budget (a dishonest upstream)
    assert m.admit(0.001, wait=0) == (
        "flowerbox gateway: the run's budget of $0.01 is spent ($0.04 used); raise it with --budget"
    )


def test_a_spent_budget_is_said_in_the_runs_language(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway speaks the run's language (FLOWER_LANG reaches its container): its budget
    refusals too, read when the refusal is made."""
    m = meter(tmp_path, budget=0.01)
    m.add(OPUS, {"input_tokens": 10_000})
    monkeypatch.setenv("FLOWER_LANG", "zh")
    assert m.admit(0.001, wait=0) == (
        "flowerbox gateway：运行的预算 $0.01 已用完（已用 $0.04）；用 --budget 调高它"
    )
    (tmp_path / "busy").mkdir()
    busy = meter(tmp_path / "busy")
    busy.admit(0.6, wait=0)
    assert "仍被进行中的请求预留" in str(busy.admit(0.5, wait=0))


def test_a_reservation_whose_usage_never_arrived_is_charged_whole(tmp_path: Path) -> None:
    m = meter(tmp_path)
    held = m.admit(0.25, wait=0)
    assert isinstance(held, Reservation)
    assert m.keep(held, OPUS) == 0.25
    usage = json.loads(m.path.read_text())
    assert usage["total_cost_usd"] == 0.25 and usage["reserved_usd"] == 0
    assert usage["models"][OPUS]["priced_as"] == "no usage arrived: charged its worst case"
    released = m.admit(0.5, wait=0)
    assert isinstance(released, Reservation)
    m.release(released)  # an error answer: nothing charged
    assert m.total == 0.25 and json.loads(m.path.read_text())["reserved_usd"] == 0


def test_without_a_budget_everything_is_admitted_and_still_metered(tmp_path: Path) -> None:
    m = meter(tmp_path, budget=None)
    assert all(isinstance(m.admit(1e6, wait=0), Reservation) for _ in range(3))


def test_a_request_too_big_for_what_is_left_goes_in_alone_while_anything_is_left(
    tmp_path: Path,
) -> None:
    """An unbounded request (reserved at a context window, $6 here) may overshoot a $1
    budget, but only alone: never beside another request, never once the budget is spent."""
    m = meter(tmp_path)
    small = m.admit(0.1, wait=0)
    assert isinstance(small, Reservation)
    outcome: list[Reservation | str] = []
    waiter = threading.Thread(target=lambda: outcome.append(m.admit(6.0, wait=10, alone=True)))
    waiter.start()
    time.sleep(0.2)
    assert outcome == []  # waits for the one in flight
    m.add(OPUS, {"output_tokens": 5_000}, reservation=small)  # $0.10
    waiter.join(timeout=5)
    [alone] = outcome
    assert isinstance(alone, Reservation)
    # While it is in flight, nothing else goes in, however small.
    assert "stayed reserved by requests in flight" in str(m.admit(0.001, wait=0))
    assert "stayed reserved" in str(m.admit(6.0, wait=0, alone=True))
    m.add(OPUS, {"input_tokens": 300_000}, reservation=alone)  # $1.20: the one overshoot
    assert m.total == pytest.approx(1.3)
    assert "is spent" in str(m.admit(6.0, wait=10, alone=True))


def test_a_bill_past_its_reservation_is_noticed(tmp_path: Path) -> None:
    m = meter(tmp_path)
    honest = m.admit(0.1, wait=0)
    assert isinstance(honest, Reservation)
    m.add(OPUS, {"output_tokens": 100}, reservation=honest)
    small = m.admit(0.001, wait=0)
    assert isinstance(small, Reservation)
    m.add(OPUS, {"input_tokens": 20_000}, reservation=small)  # $0.08: past, within the slack
    assert not m.overbilled()
    low = m.admit(0.001, wait=0)
    assert isinstance(low, Reservation)
    m.add(OPUS, {"input_tokens": 300_000}, reservation=low)  # $1.20 against $0.001
    assert m.overbilled()


def test_web_searches_are_charged_beside_their_tokens(tmp_path: Path) -> None:
    m = meter(tmp_path, budget=None)
    _, cost = m.add(OPUS, {"output_tokens": 100, "server_tool_use": {"web_search_requests": 3}})
    assert cost == pytest.approx(100 * 20 / 1e6 + 0.03)
