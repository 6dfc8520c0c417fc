"""An option given twice is a usage error naming it, and nothing runs. argparse keeps the last
value: ``tenant_suspend acme --reason fraud --reason test`` recorded "test", and a repeated
``--tenant``, ``--intent`` or ``--slug`` acted on the second of two targets the operator typed.

The walk covers every option of every command of this project, Django's own included
(``--verbosity``, ``--settings``, ``--traceback``...), on the parser alone: no database."""

import argparse
import inspect
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command, get_commands, load_command_class

from common.cli import OptionsOnce
from tenants.models import AuditEvent, Tenant

# Actions that are meant to repeat, or that stop at once (--help, --version).
REPEATABLE = (
    argparse._AppendAction,  # --x a --x b is a list (extend subclasses it)
    argparse._AppendConstAction,
    argparse._CountAction,  # -vvv
    argparse._HelpAction,
    argparse._VersionAction,
)
CANDIDATES = ("3", "1", "0.5", "x", "http://127.0.0.1:9")


def _ours(path: Path) -> bool:
    return settings.BASE_DIR in path.parents and ".venv" not in path.parts


def project_commands() -> list[str]:
    """Every management command whose module is in this tree, as Django finds them."""
    found = []
    for name, app in get_commands().items():
        if isinstance(app, str) and _ours(
            Path(inspect.getfile(type(load_command_class(app, name))))
        ):
            found.append(name)
    return sorted(found)


def test_the_walk_finds_every_command_in_the_tree():
    """A command missed by ``get_commands`` (an app left out of INSTALLED_APPS, or shadowed)
    would escape the walk below."""
    on_disk = {
        path.stem
        for path in settings.BASE_DIR.glob("*/management/commands/*.py")
        if not path.stem.startswith("_")
    }
    assert on_disk
    assert set(project_commands()) == on_disk


def test_every_command_is_built_on_the_once_only_base():
    """What the walk below checks option by option, said in one line for a new command."""
    loose = [
        name
        for name in project_commands()
        if not isinstance(load_command_class(get_commands()[name], name), OptionsOnce)
    ]
    assert not loose, f"build these on common.cli.BaseCommand (or mix in OptionsOnce): {loose}"


def _value(action: argparse.Action) -> str:
    """A value the option's type and choices take, so only the repetition can be refused."""
    if action.choices:
        return str(next(iter(action.choices)))
    for candidate in CANDIDATES:
        try:
            if action.type is not None:
                action.type(candidate)
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            continue
        return candidate
    raise AssertionError(f"no value found for {action.option_strings}")


def _given(action: argparse.Action) -> list[str]:
    if action.option_strings:
        flag = max(action.option_strings, key=len)
        return [flag] if action.nargs == 0 else [flag, _value(action)]
    return [_value(action)]


def _others(parser: argparse.ArgumentParser, tested: argparse.Action) -> list[str]:
    """The positionals and required options the command needs besides ``tested``, once."""
    groups = [g for g in parser._mutually_exclusive_groups if g.required]
    needed = [a for a in parser._actions if not a.option_strings or a.required]
    for group in groups:
        if tested not in group._group_actions:
            needed.append(group._group_actions[0])
    argv: list[str] = []
    for action in needed:
        if action is not tested:
            argv += _given(action)
    return argv


def once_only_options():
    for name in project_commands():
        parser = load_command_class(get_commands()[name], name).create_parser("manage.py", name)
        for action in parser._actions:
            if action.option_strings and not isinstance(action, REPEATABLE):
                yield pytest.param(
                    name, action.dest, id=f"{name} {max(action.option_strings, key=len)}"
                )


@pytest.mark.parametrize(("command", "dest"), list(once_only_options()))
def test_an_option_given_twice_is_refused_naming_it(command, dest):
    parser = load_command_class(get_commands()[command], command).create_parser(
        "manage.py", command
    )
    action = next(a for a in parser._actions if a.dest == dest and a.option_strings)
    others = _others(parser, action)
    option = _given(action)

    once = parser.parse_args([*others, *option])  # as today: taken
    assert getattr(once, dest) is not None

    for second in (option, [f"{option[0]}={option[1]}"] if len(option) == 2 else option):
        with pytest.raises(CommandError) as refused:
            parser.parse_args([*others, *option, *second])
        names = "/".join(action.option_strings)
        assert str(refused.value) == f"Error: argument {names}: given twice; give it once"


def test_a_repeat_is_refused_whatever_its_spelling():
    """``--reason=x``, an abbreviation and the short form of --verbosity are the same option."""
    parser = load_command_class("tenants", "tenant_suspend").create_parser("manage.py", "x")
    for argv in (
        ["acme", "--reason=fraud", "--reason", "test"],
        ["acme", "--reason", "fraud", "--rea=test"],
        ["acme", "--reason", "fraud", "-v2", "--verbosity", "3"],
    ):
        with pytest.raises(CommandError, match="given twice; give it once"):
            parser.parse_args(argv)
    taken = parser.parse_args(["acme", "--reason=fraud", "-v", "2", "--traceback"])
    assert (taken.slug, taken.reason, taken.verbosity, taken.traceback) == (
        "acme",
        "fraud",
        2,
        True,
    )


# --- end to end: nothing runs ------------------------------------------------------------------


def test_tenant_suspend_with_a_reason_twice_suspends_nothing(tenant_a):
    with pytest.raises(CommandError, match="argument --reason: given twice"):
        call_command("tenant_suspend", tenant_a.slug, "--reason", "fraud", "--reason", "test")

    tenant_a.refresh_from_db()
    assert tenant_a.status == Tenant.Status.ACTIVE
    assert not AuditEvent.objects.exists()


def test_tenant_create_with_a_slug_twice_creates_nothing(db):
    with pytest.raises(CommandError, match="argument --slug: given twice"):
        call_command(
            "tenant_create",
            "--name",
            "Acme",
            "--slug",
            "acme",
            "--slug=acme-test",
            "--admin-email",
            "ana@acme.test",
        )
    assert not Tenant.objects.exists()
    assert not AuditEvent.objects.exists()


def test_from_the_command_line_a_repeat_exits_2_and_changes_nothing(tenant_a, capsys):
    """As manage.py runs it: argparse's usage error, status 2, before the quota is set."""
    command = load_command_class("tenants", "tenant_storage_quota")
    before = tenant_a.attachment_storage_quota
    argv = ["manage.py", "tenant_storage_quota", tenant_a.slug, "--bytes", "1000", "--bytes", "2"]

    with pytest.raises(SystemExit) as stopped:
        command.run_from_argv(argv)

    assert stopped.value.code == 2
    assert "error: argument --bytes: given twice; give it once" in capsys.readouterr().err
    tenant_a.refresh_from_db()
    assert tenant_a.attachment_storage_quota == before
    assert not AuditEvent.objects.exists()
