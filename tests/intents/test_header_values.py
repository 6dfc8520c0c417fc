"""A value that becomes an email header must be one line by every definition of a line break,
not only CR and LF: mail software and the provider's SDK may split on any of them."""

from __future__ import annotations

import pytest

from intents import errors
from intents.models import Draft, IntentEvent

pytestmark = pytest.mark.django_db

# Every separator str.splitlines() splits on.
LINE_BREAKS = ["\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("brk", LINE_BREAKS, ids=[f"U+{ord(c):04X}" for c in LINE_BREAKS])
def test_a_subject_with_any_line_break_is_refused_naming_the_subject(new_draft, brk):
    with pytest.raises(errors.InvalidInput) as caught:
        new_draft(subject=f"Your refund{brk}Bcc: evil@example.org")
    assert (caught.value.code, caught.value.field, caught.value.status) == (
        "subject_invalid",
        "subject",
        422,
    )
    assert f"U+{ord(brk):04X}" in caught.value.message
    assert Draft.objects.count() == 0
    assert IntentEvent.objects.count() == 0
