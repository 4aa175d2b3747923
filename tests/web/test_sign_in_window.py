"""Sign-in throttling slides: no more than the limit in any minute, however guesses straddle
a minute's end, with the time moved by a controllable clock instead of sleeping."""

from __future__ import annotations

import redis

from shared.store.keys import KeySpace
from shared.store.login_throttle import LoginThrottle
from tests.web.conftest import OPERATOR, AppFactory, services_of, sign_in

MINUTE_END = 1_800_000_060.0  # a whole minute since the epoch


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_guesses_straddling_a_minute_boundary_get_no_more_than_the_limit(
    make_app: AppFactory,
) -> None:
    app = make_app(login_attempts_per_minute=10, login_attempts_per_user_per_minute=10)
    svc = services_of(app)
    svc.users.add(*OPERATOR)
    clock = Clock(MINUTE_END - 1.25)
    svc.throttle.clock = clock
    http = app.test_client()
    answers = []
    for n in range(25):  # 2.5 s of guesses, the minute's end in the middle
        clock.now = MINUTE_END - 1.25 + n * 0.1
        answers.append(sign_in(http, password=f"guess number {n}").status_code)
    assert answers.count(401) == 10 and answers.count(429) == 15, answers
    assert answers[:10] == [401] * 10  # the first ten, then nothing across the boundary
    # A minute after the first guess, places come back one at a time, as guesses age out.
    clock.now = MINUTE_END - 1.25 + 60.05
    assert sign_in(http, password="one more").status_code == 401
    assert sign_in(http, password="and another").status_code == 429
    clock.now += 0.1
    assert sign_in(http).status_code == 302  # the right password, in the place freed


def test_the_window_is_per_key_and_bounded(real_redis: redis.Redis, keys: KeySpace) -> None:
    clock = Clock(MINUTE_END)
    throttle = LoginThrottle(real_redis, keys, per_minute=3, per_user_per_minute=2, clock=clock)
    assert [throttle.attempt("10.0.0.1") for _ in range(5)] == [True] * 3 + [False] * 2
    assert throttle.attempt("10.0.0.2")
    assert real_redis.zcard(keys.login_attempts("10.0.0.1")) == 3  # refusals are not kept
    assert [throttle.attempt_as("ada") for _ in range(3)] == [True, True, False]
    clock.now += 59.9
    assert not throttle.attempt("10.0.0.1") and not throttle.attempt_as("ada")
    clock.now += 0.2
    assert [throttle.attempt("10.0.0.1") for _ in range(4)] == [True] * 3 + [False]
