"""The browser tests skip where Chromium is missing on a developer's machine, and fail in CI."""

from pathlib import Path

import pytest

from tests.browser import BROWSER_MARKS, require_chromium

MISSING = Path("/nonexistent/chromium")


@pytest.mark.parametrize("value", ["true", "1", "TRUE", "yes"])
def test_missing_chromium_fails_when_ci_is_set(value):
    with pytest.raises(pytest.fail.Exception, match="CI is set but /nonexistent/chromium"):
        require_chromium(MISSING, {"CI": value})


@pytest.mark.parametrize("environ", [{}, {"CI": ""}, {"CI": "false"}])
def test_missing_chromium_skips_outside_ci(environ):
    with pytest.raises(pytest.skip.Exception):
        require_chromium(MISSING, environ)


def test_present_chromium_neither_skips_nor_fails(tmp_path):
    browser = tmp_path / "chromium"
    browser.touch()

    assert require_chromium(browser, {"CI": "true"}) is None


def test_browser_tests_carry_the_check_not_a_skipif():
    assert [m.name for m in BROWSER_MARKS] == ["browser", "usefixtures"]
    assert BROWSER_MARKS[1].args == ("chromium_present",)
