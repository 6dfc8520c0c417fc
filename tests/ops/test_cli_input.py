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
        # A batch past what a query's bigint holds failed every round, forever.
        (["--batch", "9223372036854775807"], "it must be at most 10000"),
    ],
)
def test_the_worker_refuses_options_it_cannot_run_with(db, args, message):
    with pytest.raises(CommandError) as refused:
        call_command("intents_worker", *args)
    assert message in str(refused.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # -1 and nan ran thousands of database commits a second; inf crashed.
        (["--poll", "-1"], "-1 is not allowed: it must be more than 0"),
        (["--poll", "nan"], "'nan' is not a number"),
        (["--poll", "inf"], "'inf' is not a number"),
        (["--batch", "0"], "0 is not allowed: it must be at least 1"),
        (["--batch", "99999999999999999999"], "it must be at most 100000"),
    ],
)
def test_the_applier_refuses_options_it_cannot_run_with(db, args, message):
    with pytest.raises(CommandError) as refused:
        call_command("webhooks_apply", "--once", *args)
    assert message in str(refused.value)


def test_reencrypting_with_the_sealing_key_gone_is_a_command_error_changing_nothing(
    tenant_a, settings
):
    """It was a raw traceback; the transaction rolled back, which the message now says."""
    from tests.factories import make_local_mailbox

    mailbox = make_local_mailbox(tenant_a)
    before = mailbox.api_key_sealed
    assert before
    settings.SECRET_ENCRYPTION_KEYS = ["new1:" + "A" * 43 + "="]

    with pytest.raises(CommandError) as refused:
        call_command("reencrypt_secrets")

    mailbox.refresh_from_db()
    assert "Nothing was changed." in str(refused.value)
    assert mailbox.api_key_sealed == before


def test_a_key_id_given_twice_is_refused(settings):
    from django.core.exceptions import ImproperlyConfigured

    from common import crypto

    settings.SECRET_ENCRYPTION_KEYS = ["k1:" + "A" * 43 + "=", "k1:" + "B" * 43 + "="]
    with pytest.raises(ImproperlyConfigured, match="'k1' appears twice"):
        crypto.key_ring()
