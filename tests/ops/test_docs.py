"""What README.md ("Configuration") and DEPLOYMENT.md tell an operator, held against the code:
every variable the settings read is in the configuration table, with the default it states;
every variable the table names is read; every management command and option the docs run
exists; every series DEPLOYMENT.md names is emitted, with the type and labels it lists."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import get_commands, load_command_class
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DEPLOYMENT = (ROOT / "DEPLOYMENT.md").read_text()
READERS = {"env", "env_int", "env_float", "env_bool", "env_list", "required"}
# Read by the settings for the test runner, not for an operator.
NOT_FOR_OPERATORS = {"TEST_DATABASE_NAME"}
NAME = re.compile(r"`([A-Z][A-Z0-9_]{2,})`")
TOKEN = "docs-test-token"


def settings_reads() -> dict[str, ast.expr | None]:
    """Each variable config/settings.py reads, with the default expression it gives."""
    tree = ast.parse((ROOT / "config" / "settings.py").read_text())
    reads: dict[str, ast.expr | None] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in READERS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            reads[node.args[0].value] = node.args[1] if len(node.args) > 1 else None
    return reads


def table(text: str, heading: str) -> list[list[str]]:
    """The cells of each row of the first table under ``heading``."""
    section = text.split(f"\n{heading}\n", 1)[1]
    rows = [line for line in section.split("\n\n")[1].splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


CONFIGURATION = table(README, "## Configuration")


def literal(node: ast.expr | None):
    """A default written as constant arithmetic (``2 * 1024 * 1024``), else None."""
    if node is None:
        return None
    try:
        return eval(compile(ast.Expression(node), "settings", "eval"), {"__builtins__": {}})
    except NameError:
        return None


def test_every_variable_the_settings_read_is_in_the_configuration_table():
    documented = {name for row in CONFIGURATION for name in NAME.findall(" ".join(row))}
    assert set(settings_reads()) - NOT_FOR_OPERATORS - documented == set()


def test_every_variable_the_rest_of_config_reads_is_in_the_configuration_table():
    # config/dbserver.py's COUNTERSIGN_DATA_DIR moves the embedded server; gunicorn's variables
    # are DEPLOYMENT.md's (below).
    read = set()
    for path in (ROOT / "config").rglob("*.py"):
        if path.name not in {"settings.py", "gunicorn.py"}:
            read |= set(re.findall(r'os\.environ\.get\("([A-Z][A-Z0-9_]+)"', path.read_text()))
    documented = {name for row in CONFIGURATION for name in NAME.findall(row[0])}
    assert read
    assert read - documented == set()


def test_every_variable_the_table_names_is_read():
    # make run's own (scripts/devstack.py).
    devstack = (ROOT / "scripts" / "devstack.py").read_text()
    devstack += (ROOT / "config" / "dbserver.py").read_text()
    read_elsewhere = set(re.findall(r'environ\.get\("([A-Z_]+)"', devstack))
    named = {name for row in CONFIGURATION for name in NAME.findall(row[0])}
    assert named - set(settings_reads()) - read_elsewhere == set()


def test_every_variable_make_run_reads_is_in_the_configuration_table():
    # COUNTERSIGN_MCP_ADDR had its row; COUNTERSIGN_WEB_ADDR and SANDBOX_PORT, read beside it,
    # were only in an example.
    read = set(
        re.findall(
            r'environ\.get\("([A-Z][A-Z0-9_]+)"', (ROOT / "scripts" / "devstack.py").read_text()
        )
    )
    documented = {name for row in CONFIGURATION for name in NAME.findall(row[0])}
    assert read
    assert read - documented == set()


def test_the_table_states_the_defaults_the_settings_give():
    reads = settings_reads()
    wrong = []
    for row in CONFIGURATION:
        names, stated = NAME.findall(row[0]), re.findall(r"`([^`]+)`", row[1])
        if len(names) != len(stated):
            continue
        for name, said in zip(names, stated, strict=True):
            value = literal(reads.get(name))
            if isinstance(value, bool):
                ok = said == str(value).lower()
            elif isinstance(value, int | float):
                ok = re.fullmatch(r"-?[0-9.e]+", said) is not None and float(said) == value
            else:
                continue
            if not ok:
                wrong.append((name, said, value))
    assert wrong == []


def test_every_gunicorn_variable_is_in_the_deployment_guide():
    read = set(re.findall(r'"(GUNICORN_[A-Z_]+)"', (ROOT / "config" / "gunicorn.py").read_text()))
    assert len(read) == 4
    assert {name for name in read if f"`{name}`" not in DEPLOYMENT} == set()


def documented_commands() -> list[tuple[str, list[str]]]:
    text = (README + DEPLOYMENT + (ROOT / "RELIABILITY.md").read_text()).replace("\\\n", " ")
    return [
        (command, re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest))
        for command, rest in re.findall(r"manage\.py ([a-z_]+)([^`\n]*)", text)
    ]


def test_every_command_and_option_the_docs_run_exists():
    commands = get_commands()
    missing = []
    for command, options in documented_commands():
        if command not in commands:
            missing.append(command)
            continue
        parser = load_command_class(commands[command], command).create_parser("manage.py", command)
        known = {flag for action in parser._actions for flag in action.option_strings}
        missing += [f"{command} {option}" for option in options if option not in known]
    assert documented_commands()
    assert missing == [], missing


def metrics_table() -> dict[str, tuple[str, set[str]]]:
    rows = table(DEPLOYMENT, "### The metrics")
    return {row[0].strip("`"): (row[1], set(re.findall(r"`([a-z_]+)`", row[2]))) for row in rows}


@pytest.mark.django_db
def test_every_series_the_guide_lists_is_emitted_with_its_type_and_labels(
    client, settings, tenant_a
):
    settings.METRICS_TOKEN = TOKEN
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    families = {
        f.name + ("_total" if f.type == "counter" else ""): f
        for f in text_string_to_metric_families(response.content.decode())
    }
    listed = metrics_table()
    assert set(listed) == set(families)
    assert {name: kind for name, (kind, _labels) in listed.items()} == {
        name: f.type for name, f in families.items()
    }
    for name, family in families.items():
        for sample in family.samples:
            assert set(sample.labels) == listed[name][1], name


def test_every_series_the_guide_names_in_prose_or_an_alert_is_in_its_table():
    # The nginx upstreams and the restore drill's database, not series.
    not_series = {"countersign_web", "countersign_mcp", "countersign_restored"}
    named = set(re.findall(r"\b(countersign_[a-z_0-9]+)", DEPLOYMENT)) - not_series
    assert named - set(metrics_table()) == set()


MAKEFILE = (ROOT / "Makefile").read_text()
GUIDES = (
    README
    + DEPLOYMENT
    + (ROOT / "RELIABILITY.md").read_text()
    + (ROOT / "BENCHMARKS.md").read_text()
)


def documented_make_runs() -> list[list[str]]:
    """Each ``make ...`` the guides show, in backticks or at the start of a code line, split as
    the shell would (its comment dropped)."""
    spans = re.findall(r"`(make [^`]+)`", GUIDES)
    spans += re.findall(r"(?m)^(make [^#\n]+)", GUIDES)
    return [shlex.split(span) for span in spans]


def test_every_make_run_the_guides_show_is_one_make_takes():
    # make reads a word starting with - as its own option (`make bench --profile`: "make:
    # unrecognized option"); a harness's options go in the variable its target passes on, whose
    # options must be the harness's.
    targets = set(re.findall(r"(?m)^([a-z][a-z0-9-]*):", MAKEFILE))
    wrong = []
    for words in documented_make_runs():
        target, *rest = words[1:]
        if target not in targets:
            wrong.append(" ".join(words))
            continue
        recipe = MAKEFILE.split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]
        for word in rest:
            variable, equals, value = word.partition("=")
            if not equals or (
                f"$({variable})" not in recipe and f"$(or $({variable})" not in recipe
            ):
                wrong.append(" ".join(words))
                continue
            module = re.search(r"python -m ([a-z_.]+)", recipe)
            code = MAKEFILE
            if module:
                place = ROOT / module.group(1).replace(".", "/")
                place = place if place.is_dir() else place.parent
                code = "".join(path.read_text() for path in place.rglob("*.py"))
            wrong += [
                f"{target} {option}"
                for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", value)
                if f'"{option}"' not in code
            ]
    assert documented_make_runs()
    assert wrong == []


def test_every_phony_target_has_a_rule_and_make_help_lists_every_one_the_guides_run():
    # `check` was declared .PHONY with no rule: `make check` said "Nothing to be done" and
    # exited 0, as if every check had passed. `make broadcast-latency`, which the guides run,
    # was not in `make help`.
    phony = set(MAKEFILE.split("\n.PHONY:", 1)[1].split("\n", 1)[0].split())
    rules = set(re.findall(r"(?m)^([a-z][a-z0-9-]*):", MAKEFILE))
    helped = set(re.findall(r'@echo "make ([a-z][a-z0-9-]*)', MAKEFILE))
    run = {words[1] for words in documented_make_runs()}
    assert phony - rules == set()
    assert run - helped == set()


@pytest.mark.parametrize(
    "module", ["reliability.nemesis", "reliability.restore_drill", "reliability.cluster", "bench"]
)
def test_each_harness_the_guides_run_says_what_it_is_in_whole_sentences(module):
    # The drill's --help said "Disaster-recovery drill: restore the database from a backup taken
    # while sends kept going, start": the first line of a sentence that runs on.
    run = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    description = run.stdout.split("\n\n")[1]
    assert run.returncode == 0
    assert description.rstrip().endswith("."), description


def settings_highs() -> dict[str, int | float]:
    """Each variable config/settings.py reads with an upper bound (``high=``) of constants."""
    tree = ast.parse((ROOT / "config" / "settings.py").read_text())
    highs = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            high = next((k.value for k in node.keywords if k.arg == "high"), None)
            if node.func.id in READERS and high is not None and literal(high) is not None:
                highs[node.args[0].value] = literal(high)  # type: ignore[union-attr]
    return highs


def spellings(number: int | float) -> set[str]:
    """How a row may write a bound: 86400, 86,400, 3 MiB."""
    said = {f"{number:g}", f"{number:,}"}
    for power, unit in ((5, "PiB"), (4, "TiB"), (3, "GiB"), (2, "MiB"), (1, "KiB")):
        if number >= 1024**power and number % 1024**power == 0:
            said.add(f"{number // 1024**power:g} {unit}")
            break
    return said


def test_the_table_states_every_upper_bound_the_settings_enforce():
    # "refused ... past 1,000,000,000 where none is stated": an unstated lower ceiling refused a
    # figure the table allowed (SEND_CALL_CONCURRENCY=500).
    missing = []
    for name, high in settings_highs().items():
        rows = [" ".join(row[1:]) for row in CONFIGURATION if name in NAME.findall(row[0])]
        if not rows or not any(
            re.search(rf"(?<![\d.,]){re.escape(s)}(?!\d|[.,]\d)", rows[0]) for s in spellings(high)
        ):
            missing.append(f"{name} <= {high}")
    assert missing == [], missing


def where_things_are() -> list[tuple[list[str], list[str]]]:
    """Each row of README's map: the folders it describes, and the modules and folders it names
    in them (``csv_cells.py``, ``services/approval.py``, ``sending/``)."""
    rows = []
    for row in table(README, "## Where things are"):
        paths = re.findall(r"`([^`]+)`", row[1])
        folders = [p if p.endswith("/") else str(Path(p).parent) + "/" for p in paths]
        named = [
            name
            for name in re.findall(r"`([A-Za-z_][\w/]*(?:\.py|/))`", row[2])
            if not name.startswith("/")
        ]
        rows.append((folders, named))
    return rows


def test_every_module_the_map_names_is_in_its_rows_folder():
    # console's CSV exports were said to be in console/csv_cells.py after it moved to common/.
    missing = [
        f"{' '.join(folders)} {name}"
        for folders, named in where_things_are()
        for name in named
        if not any(
            (ROOT / folder / name).exists() or any((ROOT / folder).rglob(name.rstrip("/")))
            for folder in folders
        )
        and not (ROOT / name).exists()
    ]
    assert where_things_are()
    assert missing == [], missing


def named_tests() -> list[tuple[str, str]]:
    """Each test the guides cite as evidence, ``tests/x.py::test_y``, with ``::test_z`` read as a
    test of the last file named before it, as a reader reads it."""
    cited = []
    for text in (README, DEPLOYMENT, (ROOT / "RELIABILITY.md").read_text()):
        last = None
        for path, name, alone in re.findall(
            r"`(tests/[\w/]+\.py)?::(test_\w+)`|`(tests/[\w/]+\.py)`", text
        ):
            last = path or alone or last
            if name:
                cited.append((str(last), name))
    return cited


def test_every_test_the_guides_cite_is_in_the_file_they_name():
    # RELIABILITY.md's failure table cited six tests of test_acceptance.py as `::test_...` under
    # a row naming test_reconcile.py, where none of them is.
    missing = [
        f"{path}::{name}"
        for path, name in named_tests()
        if not (ROOT / path).exists()
        or not re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(), re.M)
    ]
    assert named_tests()
    assert missing == [], missing


def settings_lows() -> dict[str, int | float]:
    """Each variable config/settings.py reads with a lower bound (``low=``) of constants."""
    tree = ast.parse((ROOT / "config" / "settings.py").read_text())
    lows = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            low = next((k.value for k in node.keywords if k.arg == "low"), None)
            if node.func.id in READERS and low is not None and literal(low) is not None:
                lows[node.args[0].value] = literal(low)  # type: ignore[union-attr]
    return lows


def test_the_table_states_every_floor_of_zero():
    # The introduction promises that an unstated floor is at least 1, or a small positive figure
    # for rates and intervals: SEND_BACKOFF_*_SECONDS, SEND_CIRCUIT_COOLDOWN_SECONDS and
    # ATTACHMENT_MAX_FILES take 0 and their rows did not say so.
    said = re.compile(r"0 or more|not negative|`0`|(?<![\d.,])0 to ")
    unstated = []
    for name, low in settings_lows().items():
        rows = [" ".join(row[1:]) for row in CONFIGURATION if name in NAME.findall(row[0])]
        if low <= 0 and rows and not said.search(rows[0]):
            unstated.append(name)
    assert settings_lows()
    assert unstated == [], unstated


def schedules_table() -> dict[str, tuple[str, str]]:
    """DEPLOYMENT.md's background schedules: name -> (task, how often)."""
    return {
        row[0].strip("`"): (row[1].strip("`"), row[2])
        for row in table(DEPLOYMENT, "### The background schedules")
    }


def every(schedule) -> str:
    """How often a django-q2 schedule runs, as the table says it."""
    if schedule.schedule_type == schedule.DAILY:
        return "day"
    assert schedule.schedule_type == schedule.MINUTES, schedule.schedule_type
    return "minute" if schedule.minutes == 1 else f"{schedule.minutes} minutes"


@pytest.mark.django_db
def test_the_schedules_the_guide_lists_are_those_the_migrations_make():
    # Operators see these rows (read-only) in the admin; the guide named three of six.
    from django_q.models import Schedule

    made = {s.name: (s.func, every(s)) for s in Schedule.objects.all()}
    assert made
    assert schedules_table() == made


def guide_defaults() -> list[tuple[str, str]]:
    """Each default DEPLOYMENT.md's prose states beside a variable: ``NAME`` (default 60 s),
    ``NAME`` (600), ``NAME``, default 48."""
    text = re.sub(r"\s+", " ", DEPLOYMENT)
    return re.findall(
        r"`([A-Z][A-Z0-9_]{2,})`(?: \((?:default )?|, default )(-?[0-9][0-9,.]*[0-9]|[0-9])(?![0-9])",
        text,
    )


def test_the_guide_states_the_defaults_the_settings_give():
    reads = settings_reads()
    wrong = [
        (name, said, literal(reads[name]))
        for name, said in guide_defaults()
        if name in reads
        and isinstance(literal(reads[name]), int | float)
        and float(said.replace(",", "")) != literal(reads[name])
    ]
    assert len(guide_defaults()) >= 10
    assert wrong == [], wrong


def test_the_command_that_prints_the_body_limit_prints_the_nginx_figure_alone(settings):
    # It printed "63 objects imported automatically" first (Django's shell), so its output
    # could not be pasted into, or substituted in, the proxy's configuration.
    (command,) = re.findall(r"`(python manage\.py shell [^`]+)`", DEPLOYMENT)
    (figure,) = re.findall(r"client_max_body_size (\d+);", DEPLOYMENT)
    run = subprocess.run(
        [sys.executable, *shlex.split(command)[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == f"{figure}\n"
    assert int(figure) == settings.REQUEST_BODY_MAX_BYTES


def test_the_readmes_schemathesis_run_checks_what_the_suites_does():
    # It said `--checks all`, whose positive_data_acceptance counts every refusal of a
    # schema-valid request (an unknown cursor, a reused Idempotency-Key) as a failure: run as
    # written against a healthy server it reported six failures the suite does not check for.
    tree = ast.parse((ROOT / "tests" / "agent_api" / "test_openapi.py").read_text())
    suites = next(
        node.elts[index + 1].value
        for node in ast.walk(tree)
        if isinstance(node, ast.List)
        for index, element in enumerate(node.elts)
        if isinstance(element, ast.Constant) and element.value == "--checks"
    )
    (command,) = re.findall(r"(?m)^\.tools/bin/uv run (st .*)$", README.replace("\\\n", " "))
    words = shlex.split(command)
    assert words[words.index("--checks") + 1] == suites
    assert words[words.index("--config-file") + 1] == "tests/agent_api/schemathesis.toml"


def test_the_guide_says_where_static_files_are_collected_and_served(settings):
    # "serve STATIC_ROOT from the proxy" named a setting no variable sets, and no folder.
    where = settings.STATIC_ROOT.relative_to(settings.BASE_DIR)
    text = re.sub(r"\s+", " ", DEPLOYMENT)
    assert f"`STATIC_ROOT` (`{where}/` in the checkout" in text
    assert f"at `/{settings.STATIC_URL.lstrip('/')}`" in text


def guide_paths() -> set[str]:
    """The URL paths DEPLOYMENT.md names (`/healthz`, `GET /metrics`, `/ops/admin/login/`,
    `$PUBLIC_BASE_URL/webhooks/agentmail/<endpoint id>/`), with a sample for each <part>."""
    found = re.findall(r"`(?:GET |POST )?(?:\$PUBLIC_BASE_URL)?(/[a-z][\w/.<> -]*)`", DEPLOYMENT)
    samples = {"<endpoint id>": "3fa85f64-5717-4562-b3fc-2c963f66afa6", "<slug>": "acme"}
    paths = set()
    for path in found:
        for part, sample in samples.items():
            path = path.replace(part, sample)
        paths.add(path.replace("<secret>", "x"))
    return paths


def test_every_path_the_guide_names_is_served(settings):
    from django.urls import Resolver404, resolve

    from config.asgi import is_mcp
    from config.machine import is_machine

    unserved = []
    for path in guide_paths():
        try:
            resolve(path)
        except Resolver404:
            # /mcp/ is the ASGI entry's; /webhooks/ a prefix of the WSGI entry's short chain;
            # /static/ the proxy's.
            if not (
                is_mcp(path)
                or (is_machine(path) and path.endswith("/webhooks/"))
                or path == settings.STATIC_URL
            ):
                unserved.append(path)
    assert {"/healthz", "/readyz", "/metrics", "/mcp/"} <= guide_paths()
    assert any(path.startswith("/webhooks/agentmail/") for path in guide_paths())
    assert unserved == []


def test_the_label_values_the_guide_names_are_the_codes():
    from intents.models import SendAttempt, SendIntent
    from intents.sending.lease import CALL_TOO_LATE

    rows = {row[0].strip("`"): row[3] for row in table(DEPLOYMENT, "### The metrics")}
    states = set(re.findall(r"`([a-z_]+)`", rows["countersign_intents"]))
    live, terminal = rows["countersign_intents"].split("Terminal states", 1)
    assert states == set(SendIntent.State.values)
    assert set(re.findall(r"`([a-z_]+)`", terminal)) == set(SendIntent.TERMINAL)
    assert set(re.findall(r"`([a-z_]+)`", live)) == states - SendIntent.TERMINAL
    named = set(re.findall(r"`([a-z_]+)`", rows["countersign_attempts_total"]))
    codes = set(SendAttempt.Kind.values) | set(SendAttempt.Outcome.values) - {"pending"}
    assert named == codes | {CALL_TOO_LATE}


def test_the_rollback_names_every_migration_its_migrate_back_undoes():
    """DEPLOYMENT.md "Rolling back" has the operator migrate an app back before the release
    before starts: each migration that undoes (a table dropped, a backfill run again when the
    new release comes back) is named there, so nobody runs it unaware of what it takes away."""
    from django.db.migrations.loader import MigrationLoader

    paragraph = DEPLOYMENT[DEPLOYMENT.index("**Rolling back**") :].split("\n\n")[0]
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    unnamed = []
    for app, target in re.findall(r"manage\.py migrate ([a-z_]+) (\d{4})", paragraph):
        (node,) = [n for n in graph.leaf_nodes(app) if n[0] == app]
        back = next(n for n in graph.forwards_plan(node) if n[0] == app and n[1][:4] == target)
        undone = [n for n in graph.forwards_plan(node) if n[0] == app and n[1] > back[1]]
        unnamed += [f"{a}.{name[:4]}" for a, name in undone if f"{a}.{name[:4]}" not in paragraph]
    assert re.search(r"manage\.py migrate [a-z_]+ \d{4}", paragraph)
    assert unnamed == []
