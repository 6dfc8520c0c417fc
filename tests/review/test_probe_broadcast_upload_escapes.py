"""Found by an outsider probe of the broadcast form: a JSON upload may write, as escapes, what
no UTF-8 page can carry (an unpaired surrogate) or what no text column stores (NUL)."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from intents.models import Broadcast
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def _post(client, tenant, mailbox, text):
    upload = SimpleUploadedFile("people.json", text.encode())
    return client.post(
        f"/t/{tenant.slug}/broadcasts/new/",
        {
            "mailbox": str(mailbox.pk),
            "name": "Outage",
            "subject": "Sorry",
            "text": "Hello, sorry.",
            "recipients": upload,
        },
    )


@pytest.mark.parametrize(
    "text",
    [
        r'[{"address": "a\ud800@example.com"}]',
        r'[{"address": "\udc80@example.com"}]',
        r'["a\ud800@example.com"]',
        r'[{"address": "a@example.com", "variables": {"x\ud800": "1"}}]',
        r'[{"address": "a@example.com", "variab\ud800les": {}}]',
        r'[{"address": "a\u0000@example.com"}]',
    ],
)
def test_a_json_upload_with_escapes_no_page_can_carry_is_a_visible_error(
    signed_in, member_of, tenant_a, text
):
    mailbox = make_local_mailbox(tenant_a)
    client = signed_in(member_of(tenant_a, "approver").user)

    response = _post(client, tenant_a, mailbox, text)

    assert response.status_code == 422
    assert "\ufffd" not in response.content.decode("utf-8")
    assert not Broadcast.objects.exists()
