"""Found by an outside probe: a broadcast's page said nothing of fonts its HTML brings, of
stylesheets it loads from elsewhere or of images from elsewhere, where a draft's page names
each beside the body (review.pages.resources_named over intents.html_styles). The broadcast's
page shows the HTML's source; a mail client applies the font (another digit in an amount) and
loads what those addresses serve, which can change after the one approval that sends it to
every recipient. Named the way the draft's page names them, through the same partial."""

from __future__ import annotations

import pytest

from intents.services.broadcasts import broadcast_create
from tests.factories import make_local_mailbox

pytestmark = pytest.mark.django_db


def _page(tenant, signed_in, member_of, *, html):
    broadcast = broadcast_create(
        tenant=tenant,
        mailbox=make_local_mailbox(tenant),
        subject="Order {{ n }}",
        text="Hello {{ n }}",
        html=html,
        recipients=[{"address": "p@example.com", "variables": {"n": "7"}}],
    )
    client = signed_in(member_of(tenant, "approver").user)
    return client.get(f"/t/{tenant.slug}/broadcasts/{broadcast.pk}/").content.decode()


@pytest.mark.parametrize(
    ("html", "warning"),
    [
        (
            "<style>@font-face{font-family:X;src:url(data:font/woff2;base64,AAAA)}</style>"
            '<p style="font-family:X">IBAN DE{{ n }}</p>',
            "embedded_fonts",
        ),
        (
            '<link rel="stylesheet" href="https://cdn.example/m.css"><p>Order {{ n }}</p>',
            "remote_styles",
        ),
        ("<style>@import url(https://cdn.example/m.css);</style><p>{{ n }}</p>", "remote_styles"),
        ('<p>Order {{ n }}</p><img src="https://cdn.example/pay.png" alt="">', "remote_images"),
    ],
    ids=["font", "stylesheet-link", "import", "image"],
)
def test_fonts_styles_and_images_from_elsewhere_are_named(
    tenant_a, signed_in, member_of, html, warning
):
    page = _page(tenant_a, signed_in, member_of, html=html)

    assert f'data-body-warning="{warning}"' in page.split("data-sample>")[1].split("</section>")[0]


def test_a_plain_html_broadcast_names_none_of_them(tenant_a, signed_in, member_of):
    page = _page(tenant_a, signed_in, member_of, html="<p>Order {{ n }}</p>")

    for warning in ("embedded_fonts", "remote_styles", "remote_images"):
        assert f'data-body-warning="{warning}"' not in page
