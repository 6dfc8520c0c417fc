"""config/gunicorn.py reads its GUNICORN_* variables (DEPLOYMENT.md, the process table) the way the
settings read theirs: a value gunicorn would take but cannot serve with stops the start, naming
the variable."""

import subprocess
import sys

import pytest

from tests.ops.live import ROOT, process_env

# As DEPLOYMENT.md runs it (the config file), asked only to load the config and the app.
CHECK_CONFIG = ["-m", "gunicorn", "-c", "config/gunicorn.py", "--check-config", "config.wsgi"]


def _refusal(variable: str, value: str) -> str:
    """The last line gunicorn's config check writes with ``variable`` set to ``value``; it must
    fail."""
    done = subprocess.run(
        [sys.executable, *CHECK_CONFIG],
        cwd=ROOT,
        env={**process_env(), variable: value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    return done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        # gunicorn listened with no worker: connections were accepted and never answered.
        ("GUNICORN_WORKERS", "0"),
        ("GUNICORN_WORKERS", "two"),
        # 0 is gunicorn's "no timeout": a stuck request held its worker for ever.
        ("GUNICORN_TIMEOUT", "0"),
        ("GUNICORN_GRACEFUL_TIMEOUT", "-1"),
    ],
)
def test_a_gunicorn_variable_it_cannot_serve_with_stops_the_start_naming_it(variable, value):
    assert _refusal(variable, value) == (
        f"{variable} must be a whole number, at least 1; got {value!r}"
    )


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        # Found by probe 4 (the operator): no bound above. A timeout of 10^12 s started, then
        # every worker died as it waited for a request (select's OverflowError) and was booted
        # again, a traceback at ERROR each second; a slip of a few digits in the workers forked
        # as many Django processes, each with its database connection; 5,000 digits were called
        # no whole number and echoed whole.
        (
            "GUNICORN_TIMEOUT",
            "1000000000000",
            "GUNICORN_TIMEOUT must be at most 1000000000; got '1000000000000'",
        ),
        (
            "GUNICORN_GRACEFUL_TIMEOUT",
            "1000000001",
            "GUNICORN_GRACEFUL_TIMEOUT must be at most 1000000000; got '1000000001'",
        ),
        ("GUNICORN_WORKERS", "40000", "GUNICORN_WORKERS must be at most 1024; got '40000'"),
        (
            "GUNICORN_WORKERS",
            "9" * 5000,
            "GUNICORN_WORKERS must be at most 1024; got a number of 5000 digits",
        ),
    ],
)
def test_a_gunicorn_variable_past_what_it_can_serve_with_stops_the_start_naming_it(
    variable, value, said
):
    assert _refusal(variable, value) == said
