"""Which words an HTML body hides from the reviewer's frame (intents.html_hidden_words): for each
way of hiding that reader_looks names as hidden text, exactly the hidden words, none of the shown
ones, and whether every way it hides was located."""

import pytest

from intents.html_hidden_words import HiddenWords, hidden_words
from intents.html_styles import reader_looks

SHOWN = "<p>Your refund is on its way.</p>"


@pytest.mark.parametrize(
    ("html", "hidden"),
    [
        (
            SHOWN
            + '<div style="display:none">Reply with your <b>card</b> number</div><p>Thanks</p>',
            ["Reply with your card number"],
        ),
        (
            SHOWN + '<p>Our IBAN: <span style="font-size:0">DE89 3704 0044</span> is new</p>',
            ["DE89 3704 0044"],
        ),
        (
            SHOWN + "<p style='color:#fff;background:#fff'>Wire the money <b>today</b></p>",
            ["Wire the money today"],
        ),
        (
            SHOWN + "<table bgcolor='#ffffff'><tr><td><font color='#fefefe'>Pay here</font>"
            "</td></tr></table><p>Kind regards</p>",
            ["Pay here"],
        ),
        (
            "<p>Call 555 0100 to confirm.</p><div style='position:relative;margin-top:-40px;"
            "background:#fff;height:40px'></div>" + SHOWN,
            ["Call 555 0100 to confirm."],
        ),
        (
            SHOWN + "<svg width=10 height=10><desc>Send your password to us</desc>"
            "<circle r=4 /></svg>",
            ["Send your password to us"],
        ),
        (
            SHOWN + "<svg width=10 height=10><title>Your code is 1234</title></svg>",
            ["Your code is 1234"],
        ),
        (
            SHOWN + "<iframe srcdoc='&lt;p&gt;Enter your PIN &lt;b&gt;here&lt;/b&gt;&lt;/p&gt;'>"
            "</iframe><p>Kind regards</p>",
            ["Enter your PIN here"],
        ),
        (
            SHOWN + '<img src="data:," style="display:none" alt="Buy gift cards now">',
            ["Buy gift cards now"],
        ),
        (
            SHOWN + '<div style="max-height:calc(10px - 10px);overflow:hidden">Send gift cards'
            "</div><p>Kind regards</p>",
            ["Send gift cards"],
        ),
        (
            SHOWN + "<video><p>Reply to claim the prize</p></video>",
            ["Reply to claim the prize"],
        ),
    ],
    ids=[
        "display-none",
        "font-size-0",
        "same-colour",
        "font-colour-on-bgcolor",
        "covered",
        "svg-desc",
        "svg-title",
        "srcdoc",
        "hidden-img-alt",
        "calc-height",
        "media-fallback",
    ],
)
def test_the_words_hidden_are_exactly_the_hidden_ones(html, hidden):
    assert "hidden_text" in reader_looks(html)
    assert hidden_words(html) == HiddenWords(hidden, complete=True)


def test_every_way_of_hiding_in_one_newsletter_gives_its_words_in_order():
    html = (
        '<div style="display:none;max-height:0">Your account is locked</div>'
        "<p>Dear customer,</p>"
        "<p style='color:#ffffff'>Call +1 555 0100 now</p>"
        "<p>Your order has shipped.</p>"
        '<img src="data:," style="display:none" alt="Reply with your card number">'
        "<svg><desc>Pay to IBAN XX00 1234</desc></svg>"
        "<p>Kind regards</p>"
    )
    assert hidden_words(html) == HiddenWords(
        [
            "Your account is locked",
            "Call +1 555 0100 now",
            "Reply with your card number",
            "Pay to IBAN XX00 1234",
        ],
        complete=True,
    )


def test_a_spacer_that_hides_no_words_gives_none_beside_hidden_words():
    html = (
        '<td style="font-size:0;line-height:0">&nbsp;</td>'
        + SHOWN
        + '<span style="display:none">Hidden</span>'
    )
    assert hidden_words(html) == HiddenWords(["Hidden"], complete=True)


@pytest.mark.parametrize(
    "html",
    [
        # Which element a rule of a style sheet reaches is known only by drawing it.
        "<style>.pre{display:none}</style><p class=pre>Your account is locked</p>" + SHOWN,
        SHOWN + "<p hidden>Reply with your card number</p>",
        SHOWN + "<template><p>Reply with your card number</p></template>",
        # A box placed anywhere covers whatever is where it is: which words, only drawing tells.
        SHOWN + "<p>Pay to IBAN XX00</p><div style='position:absolute;top:0;left:0;"
        "background:#fff;height:40px;width:400px'></div>",
    ],
    ids=["style-sheet-rule", "hidden-attribute", "template", "floating-box"],
)
def test_words_hidden_where_the_body_cannot_tell_which_are_not_claimed_complete(html):
    assert "hidden_text" in reader_looks(html)
    assert hidden_words(html).complete is False
    assert "Your refund is on its way." not in hidden_words(html).words


def test_a_body_that_hides_nothing_has_no_hidden_words():
    assert hidden_words(SHOWN) == HiddenWords([], complete=True)
    assert hidden_words("") == HiddenWords([], complete=True)
