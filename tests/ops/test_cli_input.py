"""Bad command-line input is a usage error that names the option and its bound, and changes
nothing: a worker with no loop, a negative poll or batch once started and misbehaved."""

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--poll", "-1"], "-1 is not allowed: it must be more than 0"),
        (["--poll", "0"], "0 is not allowed: it must be more than 0"),
        (["--batch", "-5"], "-5 is not allowed: it must be at least 1"),
        (["--threads", "-1"], "-1 is not allowed: it must be at least 0"),
        (["--reply-threads", "two"], "'two' is not a number"),
        (["--seconds", "-3"], "-3 is not allowed: it must be at least 0"),
        (["--sweep-every", "nan-ish"], "'nan-ish' is not a number"),
        (["--poll", "nan"], "'nan' is not a number"),
        (["--threads", "0"], "--threads and --reply-threads are both 0: no loop would send."),
    ],
)
def test_the_worker_refuses_options_it_cannot_run_with(db, args, message):
    with pytest.raises(CommandError) as refused:
        call_command("intents_worker", *args)
    assert message in str(refused.value)
