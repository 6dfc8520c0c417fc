"""Bad command-line input is a usage error that names the option and its bound, and changes
nothing: a worker with no loop, a negative poll or batch once started and misbehaved. Free text
that is no text (a byte that is not UTF-8, a NUL) is refused before it reaches PostgreSQL, and no
command prints the database password."""

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from intents.models import IntentEvent
from tenants import onboarding
from tenants.models import AgentToken, AuditEvent

ROOT = Path(__file__).resolve().parents[2]

NOT_UTF8 = "\udcff"  # what Python makes of the byte 0xFF on the command line (surrogateescape)


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
        # 5,000 digits were "not a number", echoed whole; a bound it is past, cut short.
        (["--batch", "9" * 5000], "'" + "9" * 40 + "'... (5000 characters) is not allowed"),
        # A wait past what a lock's timeout takes killed the loop's thread (OverflowError).
        (["--once", "--poll", "1e300"], "1e300 is not allowed: it must be at most 3600"),
        # 100,000 threads, a database connection each.
        (["--once", "--threads", "100000"], "100000 is not allowed: it must be at most 256"),
        # Without --once, --intent was ignored and the loop sent every due intent.
        (["--intent", "1", "--exit-when-idle"], "--intent works only with --once"),
        (["--once", "--intent", "424242"], "--intent: no send intent 424242."),
        (["--once", "--intent", "0"], "0 is not allowed: it must be at least 1"),
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
        # A float past its range: no number, it was said; a bound, it is.
        (["--poll", "1e400"], "1e400 is not allowed: it must be at most 3600"),
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


def test_reencrypting_a_key_stored_unsealed_does_not_print_it(tenant_a):
    """A sealed column holding a plaintext key (written by hand, or restored from an export)
    has no key id before a colon: the refusal quoted "no encryption key with id" and the whole
    value, the AgentMail key, on the operator's terminal and in every log that keeps stderr."""
    from mailboxes.models import Mailbox
    from tests.factories import make_local_mailbox

    mailbox = make_local_mailbox(tenant_a)
    plaintext = "am_live_0123456789abcdefSECRET"
    Mailbox.objects.filter(pk=mailbox.pk).update(api_key_sealed=plaintext)

    with pytest.raises(CommandError) as refused:
        call_command("reencrypt_secrets")

    assert "0123456789abcdef" not in str(refused.value)
    assert "not a sealed value (not shown: it may be the secret itself)" in str(refused.value)
    mailbox.refresh_from_db()
    assert mailbox.api_key_sealed == plaintext


def test_a_key_id_given_twice_is_refused(settings):
    from django.core.exceptions import ImproperlyConfigured

    from common import crypto

    settings.SECRET_ENCRYPTION_KEYS = ["k1:" + "A" * 43 + "=", "k1:" + "B" * 43 + "="]
    with pytest.raises(ImproperlyConfigured, match="'k1' appears twice"):
        crypto.key_ring()


# --- free text ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("email", "message"),
    [
        (f"{NOT_UTF8}@example.test", "holds the byte 0xFF, which is not UTF-8"),
        ("a\x00b@example.test", "holds U+0000"),
        ("", "No account has the address"),
        ("   ", "No account has the address"),
        ("nobody@example.test", "No account has the address"),
        ("x" * 100_000, "No account has the address"),
    ],
    ids=["not-utf8", "nul", "empty", "blank", "unknown", "huge"],
)
def test_two_factor_reset_of_no_account_is_a_command_error(db, email, message):
    with pytest.raises(CommandError) as refused:
        call_command("two_factor_reset", email)
    assert message in str(refused.value)
    assert not AuditEvent.objects.exists()


HUGE_ADDRESS = "x" * 100_000
CUT_ADDRESS = "'" + "x" * 40 + "'... (100000 characters)"


@pytest.mark.parametrize(
    ("command", "email", "message"),
    [
        ("two_factor_reset", "", "No account has the address ''."),
        ("two_factor_reset", HUGE_ADDRESS, f"No account has the address {CUT_ADDRESS}."),
        ("changepassword", "", "No account has the address ''."),
        ("changepassword", HUGE_ADDRESS, f"No account has the address {CUT_ADDRESS}."),
        ("signin_unlock", "", "'' has no sign-in lock-out; nothing was changed."),
        (
            "signin_unlock",
            HUGE_ADDRESS,
            f"{CUT_ADDRESS} has no sign-in lock-out; nothing was changed.",
        ),
    ],
    ids=["2fa-empty", "2fa-huge", "password-empty", "password-huge", "unlock-empty", "unlock-huge"],
)
def test_an_account_command_quotes_the_address_it_did_not_find_and_cuts_it_short(
    db, command, email, message
):
    """The address was echoed as typed: an empty one read "CommandError:  has no sign-in
    lock-out", and one of 100,000 characters was a refusal as long."""
    with pytest.raises(CommandError) as refused:
        call_command(command, email, stdout=io.StringIO(), stderr=io.StringIO())
    assert str(refused.value) == message
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(
    ("slug", "message"),
    [
        (NOT_UTF8, "holds the byte 0xFF, which is not UTF-8"),
        ("acme\x00", "holds U+0000"),
        ("no-such-tenant", "No tenant with the slug"),
        ("' OR 1=1 --", "No tenant with the slug"),
        ("x" * 5000, "No tenant with the slug 'xxxxxxxxxx"),
    ],
)
def test_webhooks_backfill_of_no_tenant_is_a_command_error(db, slug, message):
    with pytest.raises(CommandError) as refused:
        call_command("webhooks_backfill", "--tenant", slug)
    assert message in str(refused.value)
    assert len(str(refused.value)) < 200


@pytest.mark.parametrize("slug", ["", "   "], ids=["empty", "blank"])
def test_webhooks_backfill_of_an_empty_slug_asks_for_no_tenant(tenant_a, tenant_b, slug):
    """``--tenant "$SLUG"`` with SLUG unset backfilled every tenant: the empty slug was read as
    no --tenant at all, and AgentMail was asked for every tenant's mailboxes."""
    with pytest.raises(CommandError) as refused:
        call_command("webhooks_backfill", "--tenant", slug, stdout=io.StringIO())
    assert str(refused.value) == (
        "--tenant: the slug is empty; name a tenant, or leave --tenant out to backfill every "
        "tenant. Nothing was asked."
    )


def test_webhooks_backfill_of_a_suspended_tenant_asks_for_its_mailboxes(tenant_a, mailbox_factory):
    """It was refused ("Resume it first"): a suspended tenant's webhooks are applied, and its
    mail whose webhooks were lost must be found without giving it back its sends
    (tests/webhooks/test_backfill.py asks the sandbox)."""
    mailbox_factory(tenant_a)
    onboarding.tenant_suspend(slug=tenant_a.slug, reason="Unpaid invoice")
    out = io.StringIO()
    call_command("webhooks_backfill", "--tenant", tenant_a.slug, stdout=out)
    assert out.getvalue().startswith("mailboxes 1 calls 1 ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["webhook_register", "x" * 5000], "No tenant has the slug 'xxxxxxxxxx"),
        (["agentmail_recover", "x" * 5000, "--check"], "no tenant has the slug 'xxxxxxxxxx"),
        (
            ["agentmail_recover", "tenant-a", "--mailbox", "x" * 5000, "--check"],
            "--mailbox: tenant-a has no mailbox 'xxxxxxxxxx",
        ),
    ],
    ids=["webhook_register", "agentmail_recover", "agentmail_recover-mailbox"],
)
def test_a_command_quotes_a_long_value_it_did_not_find_cut_short(tenant_a, args, message):
    """webhook_register and agentmail_recover quoted the slug or address whole: a refusal of
    5,000 characters for a pasted value, where every other command cuts it (common.cli.shown)."""
    with pytest.raises(CommandError) as refused:
        call_command(*args)
    assert message in str(refused.value)
    assert "(5000 characters)" in str(refused.value)
    assert len(str(refused.value)) < 200


@pytest.mark.parametrize(
    ("slug", "message"),
    [
        (NOT_UTF8, "holds the byte 0xFF, which is not UTF-8"),
        ("tenant-a\x00", "holds U+0000"),
        ("x" * 5000, "--tenant: no tenant has the slug 'xxxxxxxxxx"),
    ],
    ids=["not-utf8", "nul", "huge"],
)
def test_attachment_storage_recount_of_no_tenant_is_a_command_error(tenant_a, slug, message):
    """The byte reached psycopg (UnicodeEncodeError) and the NUL PostgreSQL (DataError):
    tracebacks from the first query."""
    with pytest.raises(CommandError) as refused:
        call_command("attachment_storage_recount", "--tenant", slug, stdout=io.StringIO())
    assert message in str(refused.value)
    assert len(str(refused.value)) < 200


@pytest.mark.parametrize("option", ["--tenants", "--api-url"])
def test_demo_agent_refuses_text_that_is_no_text(db, option):
    with pytest.raises(CommandError, match="not UTF-8"):
        call_command("demo_agent", "--once", option, f"acme{NOT_UTF8}")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # nan or a negative interval made every round's sleep raise, retried forever as if the
        # web server were down; a target past the 100 drafts a round lists drafted without pause.
        (["--interval", "nan"], "'nan' is not a number"),
        (["--interval", "-1"], "-1 is not allowed: it must be more than 0"),
        (["--target", "1000"], "1000 is not allowed: it must be at most 100"),
        (["--revise-chance", "2"], "2 is not allowed: it must be at most 1"),
    ],
)
def test_demo_agent_refuses_numbers_it_cannot_run_with(db, tmp_path, args, message):
    token_file = str(tmp_path / "tokens.json")
    with pytest.raises(CommandError) as refused:
        call_command("demo_agent", "--once", "--tenants", "none", "--token-file", token_file, *args)
    assert message in str(refused.value)


def _demo_agent_round(tenant, token_file) -> None:
    call_command(
        "demo_agent",
        "--once",
        "--tenants",
        tenant.slug,
        "--token-file",
        str(token_file),
        "--api-url",
        "http://127.0.0.1:9",  # discard: nothing listens, nothing is sent
        stdout=io.StringIO(),
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "Is a directory"),
        (b"\xff\xfe{}", "is not a token file of demo_agent (not UTF-8)"),
        (b"#!/bin/sh\necho hi\n", "is not a token file of demo_agent (not its JSON)"),
    ],
    ids=["folder", "not-utf8", "another-file"],
)
def test_demo_agent_with_a_token_file_it_cannot_use_makes_no_token(
    tenant_a, tmp_path, content, message
):
    """A folder there failed on the write after the token was made (one more stray token each
    round); another file was read as no tokens, then overwritten with them."""
    token_file = tmp_path / "tokens.json"
    if content is None:
        token_file.mkdir()
    else:
        token_file.write_bytes(content)

    with pytest.raises(CommandError) as refused:
        _demo_agent_round(tenant_a, token_file)

    assert str(refused.value).startswith("--token-file: ")
    assert message in str(refused.value)
    assert not AgentToken.objects.exists()
    assert content is None or token_file.read_bytes() == content


def test_demo_agent_reads_a_token_file_an_editor_gave_a_byte_order_mark(tenant_a, tmp_path):
    """It was read as no tokens: a new token made and the file overwritten each time."""
    from intents.management.commands.demo_agent import TOKEN_NAME
    from tenants.tokens import token_create

    _, plaintext = token_create(
        tenant=tenant_a, name=TOKEN_NAME, scopes=list(AgentToken.Scope), actor=None
    )
    token_file = tmp_path / "tokens.json"
    token_file.write_bytes(b"\xef\xbb\xbf" + json.dumps({tenant_a.slug: plaintext}).encode())

    with pytest.raises(CommandError):  # the token was taken up; the API is not there
        _demo_agent_round(tenant_a, token_file)

    assert AgentToken.objects.count() == 1


@pytest.mark.parametrize(
    "tenants", ["", " ", ",", " , "], ids=["empty", "blank", "comma", "commas"]
)
def test_demo_agent_for_no_tenant_at_all_is_refused(db, tmp_path, tenants):
    """--tenants "$TENANTS" with the variable unset: a loop that drafted for nobody, forever,
    and said nothing."""
    with pytest.raises(CommandError) as refused:
        call_command(
            "demo_agent",
            "--once",
            "--tenants",
            tenants,
            "--token-file",
            str(tmp_path / "t.json"),
        )
    assert str(refused.value) == (
        "--tenants: no slug given; name the tenants to draft for, comma-separated, or leave "
        "--tenants out for acme,globex."
    )


def test_demo_agent_once_with_the_web_server_down_says_so_in_one_line(tenant_a, tmp_path):
    """One round (--once) against a web server that does not answer ended in a traceback of the
    agent's own Unavailable exception; the loop backs off from it, --once has nothing to wait
    for."""
    with pytest.raises(CommandError) as refused:
        _demo_agent_round(tenant_a, tmp_path / "tokens.json")

    assert str(refused.value) == (
        "The round stopped: Countersign at http://127.0.0.1:9 does not answer (ConnectError). "
        "Start the web server (make run) or name it with --api-url."
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("", "'' is not an http:// or https:// address"),
        ("   ", "'   ' is not an http:// or https:// address"),
        ("localhost:8000", "'localhost:8000' is not an http:// or https:// address"),
        ("ftp://127.0.0.1", "'ftp://127.0.0.1' is not an http:// or https:// address"),
        ("http://", "'http://' is not an http:// or https:// address"),
        ("http://[::1", "'http://[::1' is not an http:// or https:// address"),
    ],
    ids=["empty", "blank", "no-scheme", "ftp", "no-host", "broken"],
)
def test_demo_agent_refuses_an_api_url_it_cannot_call(db, tmp_path, url, message):
    """An empty --api-url was taken for none (the default address); one with no scheme was
    called each round, failing as if the web server were down, forever."""
    with pytest.raises(CommandError) as refused:
        call_command(
            "demo_agent",
            "--once",
            "--tenants",
            "none",
            "--token-file",
            str(tmp_path / "t.json"),
            "--api-url",
            url,
        )
    assert f"argument --api-url: {message}" in str(refused.value)


@pytest.mark.parametrize("intent", ["-1", "0", "99999999999999999999"])
def test_intents_status_of_an_unknown_intent_is_a_command_error(db, intent):
    with pytest.raises(CommandError):
        call_command("intents_status", "--intent", intent)


def test_intents_status_of_an_unknown_intent_prints_nothing_before_the_refusal(db):
    """The counts by state were printed first, then the refusal: a script reading the output saw
    a report, and a person the error under it."""
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("intents_status", "--intent", "424242", stdout=out)
    assert str(refused.value) == "--intent: no send intent 424242."
    assert out.getvalue() == ""


# --- passwords typed or given to a command ------------------------------------------------------

GOOD_PASSWORD = "Corr3ct-horse-battery"


def _typed(monkeypatch, *answers):
    """getpass (the terminal, a process edge) answering ``answers`` in turn; an exception class
    among them is raised, as Ctrl-D (EOFError) or Ctrl-C (KeyboardInterrupt) do."""
    import getpass

    queue = list(answers)

    def answer(prompt=""):
        given = queue.pop(0)
        if isinstance(given, type):
            raise given
        return given

    monkeypatch.setattr(getpass, "getpass", answer)


def test_changepassword_asks_again_for_a_password_that_is_not_utf8(db, monkeypatch):
    """A byte that is not UTF-8 typed at the prompt passed the validators and failed in the
    hasher: a UnicodeEncodeError traceback."""
    from tenants.models import User

    user = User.objects.create_user("ana@example.test", "Old-password-123")
    bad = f"{NOT_UTF8}abcdefghijklmnop"
    _typed(monkeypatch, bad, bad, GOOD_PASSWORD, GOOD_PASSWORD)
    err = io.StringIO()

    call_command("changepassword", user.email, stdout=io.StringIO(), stderr=err)

    user.refresh_from_db()
    assert user.check_password(GOOD_PASSWORD)
    assert "The password holds a byte that is not UTF-8" in err.getvalue()
    assert NOT_UTF8 not in err.getvalue()


@pytest.mark.parametrize("stop", [EOFError, KeyboardInterrupt], ids=["ctrl-d", "ctrl-c"])
def test_changepassword_stopped_at_the_prompt_changes_nothing(db, monkeypatch, stop):
    """Ctrl-D at the prompt was an EOFError traceback."""
    from tenants.models import User

    user = User.objects.create_user("ana@example.test", "Old-password-123")
    _typed(monkeypatch, GOOD_PASSWORD, stop)

    with pytest.raises(CommandError) as refused:
        call_command("changepassword", user.email, stdout=io.StringIO())

    assert str(refused.value) == "Aborted; the password was not changed."

    user.refresh_from_db()
    assert user.check_password("Old-password-123")
    assert not AuditEvent.objects.exists()


def test_createsuperuser_refuses_a_password_that_is_not_utf8_from_the_environment(db, monkeypatch):
    """DJANGO_SUPERUSER_PASSWORD with a byte that is not UTF-8: a traceback from the hasher."""
    from tenants.models import User

    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", f"{NOT_UTF8}abcdefghijklmnop")

    with pytest.raises(CommandError) as refused:
        call_command("createsuperuser", "--noinput", "--email", "root@countersign.test")

    assert str(refused.value) == (
        "DJANGO_SUPERUSER_PASSWORD: The password holds a byte that is not UTF-8 (check the "
        "terminal's encoding); no account was made."
    )
    assert not User.objects.exists()
    assert not AuditEvent.objects.exists()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        (
            [f"{NOT_UTF8}abcdefghijklmnop", f"{NOT_UTF8}abcdefghijklmnop"],
            "The password holds a byte that is not UTF-8 (check the terminal's encoding); "
            "no account was made.",
        ),
        ([EOFError], "Aborted; no account was made."),
    ],
    ids=["not-utf8", "ctrl-d"],
)
def test_createsuperuser_at_the_prompt_refuses_cleanly(db, monkeypatch, answers, message):
    from tenants.models import User

    _typed(monkeypatch, *answers)

    with pytest.raises(CommandError) as refused:
        call_command(
            "createsuperuser",
            "--email",
            "root@countersign.test",
            stdin=_Terminal(),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )

    assert str(refused.value) == message
    assert not User.objects.exists()


# --- sandbox and chaos: checked before anything starts ----------------------------------------


@pytest.mark.parametrize(
    ("port", "message"),
    [("70000", "it must be at most 65535"), ("-1", "it must be at least 0")],
)
def test_sandbox_with_an_impossible_port_is_a_command_error(tmp_path, port, message):
    with pytest.raises(CommandError) as refused:
        call_command("sandbox", "--port", port, "--db", str(tmp_path / "sandbox.sqlite3"))
    assert message in str(refused.value)


def test_sandbox_on_a_folder_as_its_database_is_a_command_error(tmp_path):
    """sqlite3's OperationalError was a traceback."""
    with pytest.raises(CommandError) as refused:
        call_command("sandbox", "--port", "0", "--db", str(tmp_path))
    assert str(refused.value).startswith(f"--db: the sandbox cannot use {tmp_path} as its database")


@pytest.mark.parametrize("db", ["", "  "], ids=["empty", "blank"])
def test_sandbox_with_an_empty_database_path_is_refused_before_it_starts(tmp_path, db):
    """``--db "$SANDBOX_DB"`` with the variable unset: SQLite took the empty name for a private
    temporary database, and the sandbox served from it as if nothing were wrong, losing every
    inbox, key and send when it stopped. Run as an operator runs it, so that a sandbox that
    does start is stopped by the timeout."""
    import subprocess
    import sys

    from tests.dbtemplate import ROOT

    try:
        result = subprocess.run(
            [sys.executable, "manage.py", "sandbox", "--port", "0", "--db", db],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the sandbox started on an empty --db")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "CommandError: --db: the path is empty; name the sandbox's SQLite file, or leave --db "
        "out for .data/sandbox.sqlite3.\n"
    )


def test_sandbox_on_a_port_in_use_is_a_command_error_naming_it(tmp_path):
    """A second `manage.py sandbox` while one listens: the bind error was masked by a
    RuntimeError from the cleanup (the delivery thread joined before it was started)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        with pytest.raises(CommandError) as refused:
            call_command("sandbox", "--port", port, "--db", str(tmp_path / "sandbox.sqlite3"))
    assert f"cannot listen on 127.0.0.1 port {port}" in str(refused.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seconds", "nan"], "'nan' is not a number"),
        (["--seconds", "inf"], "'inf' is not a number"),
        (["--seconds", "0"], "it must be more than 0"),
        (["--drain-seconds", "-5"], "it must be more than 0"),
        (["--drain-seconds", "nan"], "'nan' is not a number"),
        (["--workers", "1"], "it must be at least 2"),
        (["--intents", "0"], "it must be at least 1"),
        # A typo (an extra digit or two) started thousands of worker processes.
        (["--workers", "33"], "33 is not allowed: it must be at most 32"),
        (["--workers", "3000"], "it must be at most 32"),
        (["--intents", "1000001"], "1000001 is not allowed: it must be at most 1000000"),
        (["--intents", "nan"], "'nan' is not a number"),
        (["--workers", "-3"], "it must be at least 2"),
        # A window of 1e300 seconds (or a typo's extra zeros) ran until someone killed it.
        (["--seconds", "86401"], "86401 is not allowed: it must be at most 86400"),
        (["--seconds", "1e300"], "1e300 is not allowed: it must be at most 86400"),
        (["--seconds", "-1"], "it must be more than 0"),
        (["--drain-seconds", "0"], "it must be more than 0"),
        (["--drain-seconds", "1e9"], "1e9 is not allowed: it must be at most 86400"),
        (["--drain-seconds", "inf"], "'inf' is not a number"),
        # The seed names the run's tenants and mailboxes: 50 digits overflowed a slug, an error
        # only once the scratch database and the sandbox were up.
        (["--seed", "-1"], "-1 is not allowed: it must be at least 0"),
        (["--seed", "4294967296"], "4294967296 is not allowed: it must be at most 4294967295"),
        (["--seed", "1" + "0" * 50], "it must be at most 4294967295"),
        (["--seed", "nan"], "'nan' is not a number"),
        (["--seed", "seven"], "'seven' is not a number"),
    ],
)
def test_chaos_refuses_numbers_it_cannot_run_with(monkeypatch, args, message):
    """chaos replaces itself with the nemesis (os.execv, faked here as the process edge): a
    refused option must stop before that."""
    started = []
    monkeypatch.setattr(os, "execv", lambda *a: started.append(a))
    monkeypatch.setattr(os, "chdir", lambda *a: None)
    with pytest.raises(CommandError) as refused:
        call_command("chaos", *args)
    assert message in str(refused.value)
    assert not started


@pytest.fixture
def chaos_started(monkeypatch, tmp_path):
    """What chaos, run in ``tmp_path``, would exec (os.execv, the process edge, faked)."""
    monkeypatch.chdir(tmp_path)
    started = []
    monkeypatch.setattr(os, "execv", lambda *a: started.append(a))
    monkeypatch.setattr(os, "chdir", lambda *a: None)
    return started


def test_chaos_writes_its_report_and_logs_where_the_operator_named_them(tmp_path, chaos_started):
    """chaos moves to the repository before it execs the nemesis: ``--json report.json`` and
    ``--logs logs`` were written in the repository, not in the folder the operator ran it from."""
    call_command("chaos", "--json", "report.json", "--logs", "logs")
    [(_, argv)] = chaos_started
    assert argv[argv.index("--json") + 1] == str(tmp_path / "report.json")
    assert argv[argv.index("--logs") + 1] == str(tmp_path / "logs")


def test_chaos_takes_every_number_up_to_its_bounds(chaos_started):
    call_command(
        "chaos",
        *("--intents", "1000000", "--workers", "32", "--seconds", "86400"),
        *("--drain-seconds", "86400", "--seed", "4294967295"),
    )
    [(_, argv)] = chaos_started
    given = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert given == {
        "--intents": "1000000",
        "--workers": "32",
        "--fault-seconds": "86400.0",
        "--drain-seconds": "86400.0",
        "--seed": "4294967295",
    }


@pytest.mark.parametrize(
    ("option", "where", "message"),
    [
        ("--json", "missing/report.json", "the folder {tmp}/missing does not exist"),
        ("--json", "", "{tmp} is a folder: name a file for the report"),
        ("--json", "folder", "{tmp}/folder is a folder: name a file for the report"),
        ("--json", "re\x00port.json", "a path cannot hold U+0000 (NUL)"),
        ("--logs", "file", "{tmp}/file is a file: name a folder for the logs"),
        ("--logs", "lo\x00gs", "a path cannot hold U+0000 (NUL)"),
    ],
    ids=["json-no-folder", "json-empty", "json-folder", "json-nul", "logs-file", "logs-nul"],
)
def test_chaos_refuses_a_report_or_log_path_it_cannot_write_before_it_starts(
    tmp_path, chaos_started, option, where, message
):
    """A report path in a folder that does not exist, or that is a folder, failed only after the
    whole run (minutes of faults and the drain), in a traceback that lost the report and made a
    clean history check exit 1; a NUL in a path was a ValueError traceback from the exec."""
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("")
    with pytest.raises(CommandError) as refused:
        call_command("chaos", option, where)
    assert message.format(tmp=tmp_path) in str(refused.value)
    assert not chaos_started


# --- dbserver: a truthful "ready", never the password ------------------------------------------

PASSWORD = "s3cr3t-db-password"


def dbserver(action: str) -> str:
    out = io.StringIO()
    call_command("dbserver", action, stdout=out, stderr=out)
    return out.getvalue()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"postgres://countersign:{PASSWORD}@db.internal:5432/cs",
            "postgres://countersign:********@db.internal:5432/cs",
        ),
        (
            f"postgres://countersign@db.internal/cs?sslmode=require&password={PASSWORD}",
            "postgres://countersign@db.internal/cs?sslmode=require&password=********",
        ),
        (
            "postgresql://postgres:@/countersign?host=/srv/pg",
            "postgresql://postgres:@/countersign?host=/srv/pg",
        ),
        # Found by probe 4 (the operator): libpq's sslpassword, the passphrase of the client's
        # TLS key (sslkey), was printed whole by the command whose output is safe to paste.
        (
            f"postgres://countersign:{PASSWORD}@db.internal/cs?sslkey=/etc/cs/client.key"
            f"&sslpassword={PASSWORD}-key",
            "postgres://countersign:********@db.internal/cs?sslkey=/etc/cs/client.key"
            "&sslpassword=********",
        ),
    ],
    ids=["in-address", "in-query", "none", "key-passphrase"],
)
def test_dbserver_url_masks_the_database_password(settings, url, shown):
    settings.DATABASE_URL = url
    assert dbserver("url").strip() == shown


def test_dbserver_start_says_ready_only_when_the_database_answers(settings):
    assert dbserver("start").startswith("PostgreSQL ready at ")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: the connection is refused
        settings.DATABASE_URL = f"postgres://countersign:{PASSWORD}@127.0.0.1:{port}/cs"
        with pytest.raises(CommandError) as refused:
            dbserver("start")
    assert "PostgreSQL does not answer at postgres://countersign:********@" in str(refused.value)
    assert PASSWORD not in str(refused.value)


def test_dbserver_stop_of_a_server_not_running_says_so_and_starts_none(tmp_path):
    """The settings start the embedded server to learn its URL: `make stop` (and `make clean`)
    with none running started one, on a fresh checkout made a whole cluster first, stopped it
    and said "embedded PostgreSQL stopped"."""
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    run = subprocess.run(
        [sys.executable, "manage.py", "dbserver", "stop"],
        cwd=ROOT,
        env={**env, "COUNTERSIGN_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    assert "the embedded PostgreSQL server is not running" in run.stderr
    assert list(tmp_path.iterdir()) == []


def test_intents_status_of_an_intent_prints_the_counts_then_the_intent(mailbox_a, make_intent):
    intent = make_intent(mailbox_a, attempts=1)
    out = io.StringIO()

    call_command("intents_status", "--intent", str(intent.pk), stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0] == "Send intents by state:"
    assert any(
        line.startswith(f"Intent {intent.pk} ({mailbox_a.tenant.slug}, {mailbox_a.address}): ")
        for line in lines
    )
    assert "  #  kind    outcome     http  ms     worker" in lines


def test_intents_status_shows_a_members_control_characters_as_code_points(
    mailbox_a, make_intent, admin_a
):
    """A tenant member's cancel reason reached the operator's terminal raw: an escape sequence
    (here OSC 52, which sets the terminal's clipboard) and a line break that printed a forged
    journal line under the intent. (The services refuse such a reason since; a row stored before,
    or a provider's words in the same column, still reach the command: written here as that row.)"""
    intent = make_intent(mailbox_a)
    reason = "dup\x1b]52;c;cm0gLXJmIH4K\x07\n  00:00:00.000000 intent.accepted sending -> accepted"
    IntentEvent.objects.create(
        tenant=mailbox_a.tenant,
        intent=intent,
        draft_id=intent.draft_id,
        actor_kind=IntentEvent.Actor.PERSON,
        actor_user=admin_a.user,
        action="intent.cancelled",
        from_state="queued",
        to_state="cancelled",
        reason=reason,
    )
    out = io.StringIO()

    call_command("intents_status", "--intent", str(intent.pk), stdout=out)

    assert "\x1b" not in out.getvalue()
    assert "\x07" not in out.getvalue()
    [cancelled] = [line for line in out.getvalue().splitlines() if "intent.cancelled" in line]
    assert cancelled.endswith(
        " dup[U+001B]]52;c;cm0gLXJmIH4K[U+0007][U+000A]  00:00:00.000000 intent.accepted "
        "sending -> accepted"
    )
    assert not any(line.startswith("  00:00:00.000000") for line in out.getvalue().splitlines())
