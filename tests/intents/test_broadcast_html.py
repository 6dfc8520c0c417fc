"""Where a placeholder may sit in a broadcast's HTML template (intents/broadcast_html.py): in text
and quoted attribute values only, named with where it was found otherwise; and which placeholders
begin a URL attribute, so every row's value for them must be an http(s) or mailto URL.

Found by an outside probe: a value is HTML-escaped, which is no protection in an unquoted
attribute (``<img src={{ pic }}>`` with ``x.png onerror=alert(1)`` added an event handler in the
one row the reviewer was not shown), and an ``href`` a value began could be ``javascript:``."""

from __future__ import annotations

import pytest

from intents.broadcast_content import TemplateInvalid
from intents.broadcast_html import url_placeholders


@pytest.mark.parametrize(
    "template,where",
    [
        ("<p>Hi <img src={{ t }}></p>", "unquoted value of the src attribute of <img>"),
        ("<a title=x{{ t }}>", "unquoted value of the title attribute of <a>"),
        ('<a href="x"title={{ t }}/>', "unquoted value of the title attribute of <a>"),
        ("<{{ t }} src=x>", "in a tag name"),
        ("<h{{ t }}>", "in a tag name"),
        ('<a {{ t }}="1">', "in an attribute name of <a>"),
        ('<a data-{{ t }}="1">', "in an attribute name of <a>"),
        ("<a onclick=\"track('{{ t }}')\">", "event-handler attribute onclick of <a>"),
        ('<body ONLOAD="{{ t }}">', "event-handler attribute onload of <body>"),
        ('<p style="color: {{ t }}">', "style attribute of <p>"),
        ('<iframe srcdoc="{{ t }}">', "srcdoc attribute of <iframe>"),
        ('<script>var n = "{{ t }}";</script>', "inside <script>"),
        ("<STYLE>p { color: {{ t }} }</STYLE>", "inside <style>"),
        ("<noscript><p>{{ t }}</p></noscript>", "inside <noscript>"),
        ("<script><!--</script>{{ t }}", "inside <script>"),
        ("<!-- {{ t }} -->", "inside an HTML comment"),
        ("<!--[if mso]><a href={{ t }}><![endif]-->", "inside an HTML comment"),
        ("<!DOCTYPE {{ t }}>", "inside a markup declaration"),
        ("<![<![{{ t }}", "inside a markup declaration"),
        ("<?xml {{ t }}?>", "inside a markup declaration"),
        ("</a {{ t }}>", "in an end tag"),
        ('<a href="{{ t }}', "in a tag that is never closed"),
        ('<a href="javascript:{{ t }}">', "href attribute of <a>, after a script or data URL"),
        ('<a href=" &#106;ava\tscript:{{ t }}">', "after a script or data URL"),
        ('<object data="data:text/html,{{ t }}">', "after a script or data URL"),
    ],
)
def test_a_placeholder_outside_text_and_quoted_values_is_refused_naming_it_and_where(
    template, where
):
    with pytest.raises(TemplateInvalid) as caught:
        url_placeholders(f"<p>{{{{ name }}}}</p>\n{template}")
    assert caught.value.field == "html"
    assert caught.value.message.startswith("html, line 2: {{ t }} is ")
    assert where in caught.value.message


@pytest.mark.parametrize(
    "template,in_url",
    [
        ("<p>Hello {{ name }}, &amp; {{ t }}</p>", set()),
        ("<img alt=\"{{ name }}\" title='{{ t }}'>", set()),
        ('<img src="{{ pic }}">', {"pic"}),
        ("<a HREF = ' {{ link }}'>{{ name }}</a>", {"link"}),
        ('<a href="{{ link }}{{ t }}">', {"link"}),
        ('<a href="java{{ link }}">', {"link"}),
        ('<form action="{{ link }}"><button formaction="{{ t }}">', {"link", "t"}),
        ('<svg><a xlink:href="{{ link }}"></a></svg>', {"link"}),
        ('<img srcset="https://x.test/a.png 1x, {{ pic }} 2x">', {"pic"}),
        ('<a href="https://shop.test/track/{{ t }}?u={{ name }}">', set()),
        ('<a href="mailto:{{ t }}">', set()),
        ('<a href="/orders/{{ t }}">', set()),
        ('<a href="?q={{ t }}#{{ name }}">', set()),
        ("<title>{{ t }}</title><textarea><a href={{ x }}></textarea>", set()),
        ("<script>var a = 1;</script><p>{{ t }}</p>", set()),
        ("<!-- note --><p>{{ t }}</p>", set()),
        ("<p>{{ t }} < {{ name }}</p>", set()),
    ],
)
def test_text_and_quoted_values_are_kept_and_url_starts_named(template, in_url):
    assert url_placeholders(template) == in_url


@pytest.mark.parametrize(
    "template",
    [
        "<svg><title><img src=x onerror={{ t }}></title></svg>",
        "<MATH><title><img src=x onerror={{ t }}></title></MATH>",
        "<svg><textarea><a href={{ t }}>x</a></textarea></svg>",
        '<svg><title><img src=x title="</title>" onerror={{ t }}></svg>',
        "<select><xmp><img src=x onerror={{ t }}></xmp></select>",
    ],
)
def test_a_text_element_holding_markup_inside_svg_math_or_select_is_not_text(template):
    """Found by an outside probe: the text of <title>, <textarea> and the other RCDATA/RAWTEXT
    elements was skipped as text, but inside <svg> or <math> a browser reads it as tags
    (foreign content has no RCDATA), so ``<svg><title><img src=x onerror={{ t }}>`` passed and
    a row's value became an event handler with attributes of its own (Chromium's parser:
    ``<img src="x" onerror="alert(1)" data-x="1">``)."""
    with pytest.raises(TemplateInvalid) as caught:
        url_placeholders(f"<p>{{{{ name }}}}</p>\n{template}")
    assert caught.value.message.startswith("html, line 2: {{ t }} is after <")
    assert "holding markup" in caught.value.message


@pytest.mark.parametrize(
    "template",
    [
        "<svg><title>{{ t }}</title></svg>",
        "<title>{{ t }}</title><svg><textarea><b>kept as it is</b></textarea></svg>",
        "<svg></svg><textarea>{{ t }} &lt;b&gt;</textarea>",
    ],
)
def test_a_text_element_whose_text_holds_no_markup_keeps_its_placeholders(template):
    assert url_placeholders(template) == set()
