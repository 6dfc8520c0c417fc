"""config/gunicorn.py reads its GUNICORN_* variables (DEPLOYMENT.md, the process table) the way the
settings read theirs: a value gunicorn would take but cannot serve with stops the start, naming
the variable."""

import subprocess
import sys

import pytest

from tests.ops.live import ROOT, process_env

# As DEPLOYMENT.md runs it (the config file), asked only to load the config and the app.
CHECK_CONFIG = ["-m", "gunicorn", "-c", "config/gunicorn.py", "--check-config", "config.wsgi"]


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
    done = subprocess.run(
        [sys.executable, *CHECK_CONFIG],
        cwd=ROOT,
        env={**process_env(), variable: value},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip().splitlines()[-1] == (
        f"{variable} must be a whole number, at least 1; got {value!r}"
    )
