"""``manage.py <command> --help`` says what each option of ours does and what it is when left
out: several options had no help at all (``--poll``, ``--batch``, ``--host``, ``--port``,
``--db``, ``--tenants``...), and most defaults were nowhere but in the code, so an operator could
not tell how often a worker polls or which file the sandbox writes without reading it."""

import argparse

import pytest
from django.core.management import BaseCommand, get_commands, load_command_class

from tests.ops.test_cli_repeated_options import project_commands

# Django's own options (--verbosity, --settings...) are Django's to document.
DJANGOS = {action.dest for action in BaseCommand().create_parser("manage.py", "x")._actions}


def _unstated(default) -> bool:
    """No value (an optional text, a flag): nothing to state. 0 is a value, and is stated."""
    return default is None or default is False or default in ("", argparse.SUPPRESS)


def options(name: str) -> list[argparse.Action]:
    command = load_command_class(get_commands()[name], name)
    parser = command.create_parser("manage.py", name)
    return [action for action in parser._actions if action.dest not in DJANGOS]


def _cases():
    return [(name, action.dest) for name in project_commands() for action in options(name)]


@pytest.mark.parametrize(("command", "dest"), _cases())
def test_every_option_says_what_it_does_and_its_default(command, dest):
    parser = load_command_class(get_commands()[command], command).create_parser(
        "manage.py", command
    )
    action = next(a for a in parser._actions if a.dest == dest)
    # As --help prints it: %(default)s filled in.
    shown = parser._get_formatter()._expand_help(action) if action.help else ""

    assert shown.strip(), f"{command} {dest}: no help"
    if not _unstated(action.default) and not isinstance(action, argparse._StoreConstAction):
        assert "default" in shown and str(action.default) in shown, (command, dest, shown)


def _help(name: str) -> str:
    parser = load_command_class(get_commands()[name], name).create_parser("manage.py", name)
    return " ".join(parser.format_help().split())


def test_intents_status_help_says_what_it_prints_as_the_deployment_guide_does():
    # DEPLOYMENT.md "Watching it" reads it for the uncertain sends' age and the sends waiting on
    # AgentMail (a refused key, an open circuit, a 429); its help named the counts, the queued
    # age and one intent's attempts only.
    said = _help("intents_status")
    assert "oldest due uncertain" in said
    assert "wait on AgentMail" in said


def test_tenant_storage_quota_help_says_default_puts_the_deployments_quota_back():
    # "or back the deployment's TENANT_ATTACHMENT_STORAGE_BYTES (--default)"
    assert "or put it back on the deployment's TENANT_ATTACHMENT_STORAGE_BYTES (--default)" in (
        _help("tenant_storage_quota")
    )
