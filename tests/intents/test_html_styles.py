"""Which readers an HTML body's own CSS may show other text than the draft page's frame shows
the reviewer (intents.html_styles.reader_looks): real shapes of email HTML, spelled as a
browser still applies them."""

import pytest

from intents.html_styles import READER_LOOKS, conditional_comments, html_words, reader_looks
from intents.policy import invisible_in_content

# A sentence only a phone reader sees: hidden at any width above 600 px, the reviewer's.
PHONE_ONLY = (
    "<html><head><style>.m{display:none} @media only screen and (max-width: 600px) "
    "{ .m{display:block !important} }</style></head><body><p>Your refund is on its way.</p>"
    "<p class=m>Reply with your card number to speed it up.</p></body></html>"
)
# A sentence only a dark-mode reader sees: white on white in light mode.
DARK_ONLY = (
    "<style>.d{color:#fff} @media (prefers-color-scheme: dark) { .d{color:#eee !important} }"
    "</style><div style='background:#fff'><p class=d>Pay to IBAN XX00 1234 instead.</p></div>"
)
# Only a font size for phones. It warns too: what a rule changes is known only by drawing it
# for each reader (font-size:0 hides as well as display:none does).
FONT_SIZE_ONLY = "<style>@media (max-width:600px){p{font-size:18px}}</style><p>Hello</p>"


@pytest.mark.parametrize(
    ("html", "looks"),
    [
        (PHONE_ONLY, ["narrow_screens", "hidden_text"]),
        (DARK_ONLY, ["dark_mode"]),
        (FONT_SIZE_ONLY, ["narrow_screens"]),
        (
            "<style>@media (min-width: 601px){.desk{display:none}}</style>",
            ["narrow_screens", "hidden_text"],
        ),
        ("<style>@media (400px <= width <= 700px){p{color:red}}</style>", ["narrow_screens"]),
        ("<style>@media (orientation: portrait){p{color:red}}</style>", ["narrow_screens"]),
        (
            "<style>@container (max-width: 400px){p{display:none}}</style>",
            ["narrow_screens", "hidden_text"],
        ),
        ("<style>@media print{.x{display:block}}</style>", ["print"]),
        ("<style>@media screen{.x{display:none}}</style>", ["print", "hidden_text"]),
        ("<style media='print'>.x{display:block}</style>", ["print"]),
        (
            "<style>@supports (display: grid){.x{display:none}}</style>",
            ["mail_client", "hidden_text"],
        ),
        ("<style>@-moz-document url-prefix(){.tb{display:block}}</style>", ["mail_client"]),
        ("<style>[data-ogsc] .x{color:#fff}</style>", ["outlook_dark_mode"]),
        ("<style>[data-ogsb] .x{background:#000}</style>", ["outlook_dark_mode"]),
        ('<meta name="color-scheme" content="light dark"><p>Hi</p>', ["dark_mode"]),
        ("<style>:root{color-scheme: light dark}</style>", ["dark_mode"]),
        ("<p style='color: light-dark(#000, #fff)'>Hi</p>", ["dark_mode"]),
        (
            "<picture><source media='(prefers-color-scheme: dark)' srcset='data:,'>"
            "<img src='data:,'></picture>",
            ["dark_mode"],
        ),
        ("<style>@media (hover: none){.x{display:block}}</style>", ["device_settings"]),
        (
            "<style>@media (prefers-reduced-motion: reduce){.x{display:block}}</style>",
            ["device_settings"],
        ),
        (
            "<style>@media (-webkit-min-device-pixel-ratio: 2){.x{display:block}}</style>",
            ["device_settings"],
        ),
        ("<!--[if mso]><p>Pay to IBAN XX00 9999.</p><![endif]-->", ["outlook_windows"]),
        # Hidden from every reader of the frame, shown by an inbox preview and Outlook.
        ("<style>p{color:#333} .x{display:none}</style><p>Hi</p>", ["hidden_text"]),
        ("<!--[if gte mso 9]><xml></xml><![endif]--><p>Hi</p>", ["outlook_windows"]),
        ("<!--[if !mso]><!--><p>Hi</p><!--<![endif]-->", ["outlook_windows"]),
        ("<![if !mso]><p>Hi</p><![endif]>", ["outlook_windows"]),
        ("<!--[IF MSO]><p>Pay</p><![ENDIF]-->", ["outlook_windows"]),
        ("<!-- [ if mso ]><p>Pay</p><![endif]-->", ["outlook_windows"]),
        (
            "<style>@media screen and (max-width:600px){.a{}} @media (prefers-color-scheme:dark)"
            "{.b{}} [data-ogsc] .c{} @media print{.d{}} @supports (gap:1px){.e{}}</style>",
            ["narrow_screens", "dark_mode", "outlook_dark_mode", "print", "mail_client"],
        ),
    ],
)
def test_css_that_depends_on_the_reader_is_named_by_who_sees_otherwise(html, looks):
    assert reader_looks(html) == looks


# However it is spelled, as Chromium still applies it.
@pytest.mark.parametrize(
    "html",
    [
        "<style>@MEDIA (MAX-WIDTH: 600PX){.m{display:block}}</style>",
        "<style>@\\6d edia (max-width: 600px){.m{display:block}}</style>",
        "<style>@media (max-\\77 idth: 600px){.m{display:block}}</style>",
        "<svg><style>&#64;media (max-width: 600px){.m{display:block}}</style></svg>",
        "<style>@media /* { */ (max-width: 600px) {.m{display:block}}</style>",
        "<p>/* a path like C:/* in the text */</p><style>@media (max-width:600px){.m{}}</style>",
        "<p>/* never closed</p><style>@media (max-width:600px){.m{}}</style>",
        "<style>@media (max-width: 600px)" + " " * 5000 + "{.m{display:block}}</style>",
        "<style media='only screen and (max-width:600px)'>.m{display:block}</style>",
    ],
)
def test_a_phone_only_rule_is_found_however_it_is_spelled(html):
    assert reader_looks(html) == ["narrow_screens"]


@pytest.mark.parametrize(
    "html",
    [
        "",
        "<p>Hello</p>",
        "<style>p{color:#333} .x{display:block}</style><p>Hi</p>",
        "<style>@media all{p{color:#333}}</style>",
        "<style media='all'>p{color:#333}</style>",
        '<meta name="color-scheme" content="light only"><style>:root{color-scheme:light}</style>',
        "<p>Follow us on social media: @media_team. Our support@example.com replies.</p>",
        "<p>Use the [data] tab; the colour scheme is yours.</p>",
        "<!-- a comment of the template --><p>Hi</p><!-- [data] [iffy] -->",
    ],
)
def test_css_that_shows_every_reader_the_same_is_not_named(html):
    assert reader_looks(html) == []


def test_every_look_has_words_for_the_page():
    assert all(str(words) for words in READER_LOOKS.values())


def test_the_source_of_each_conditional_comment_is_given_as_written():
    """What the draft page shows as text beside the frame, which hides it: each block from its
    "[if" to its "[endif]", in its own case and spacing; an unclosed one to the end."""
    html = (
        "<p>a</p><!--[if mso]><p>Pay to IBAN XX00 9999.</p><![endif]--><p>b</p>"
        "<!--[if !mso]><!--><p>c</p><!--<![endif]--><![IF !mso]><p>d</p><![ENDIF]>"
        "<!--[if gte mso 9]><p>never closed"
    )

    assert conditional_comments(html) == [
        "<!--[if mso]><p>Pay to IBAN XX00 9999.</p><![endif]-->",
        "<!--[if !mso]><!--><p>c</p><!--<![endif]-->",
        "<![IF !mso]><p>d</p><![ENDIF]>",
        "<!--[if gte mso 9]><p>never closed",
    ]
    assert conditional_comments("<p>Hi</p><!-- a comment -->") == []
    assert conditional_comments("") == []


# Spacers and gap fixes of ordinary templates: an element its own style hides that holds no
# words (white space, &nbsp; and the other spaces, nothing at all), and an image without alt.
@pytest.mark.parametrize(
    "html",
    [
        '<table><tr><td style="font-size:0;line-height:0" height="20">&nbsp;</td></tr></table>',
        '<div style="height:0;line-height:0;font-size:0">&nbsp;</div><p>Hello</p>',
        '<img src="data:," width="600" style="display:block;height:0"><p>Hello</p>',
        '<img src="data:," alt="" style="display:block;height:0">',
        '<table><tr><td style="font-size:0px;line-height:0px;mso-line-height-rule:exactly">'
        "&#8202;</td></tr></table>",
        "<td style='font-size:0' height=20></td><td>Hello</td>",
        "<span style='font-size:0'>&nbsp; &#160;&ensp;&thinsp;\u3000\n</span><p>Hello</p>",
        "<div style='font-size:0;line-height:0'><img src='data:,' alt='' width=1 height=20>"
        "<br></div>",
        "<div style='display:none'><span><b>&nbsp;</b></span>\n</div><p>Hello</p>",
        "<div style='max-height:0'><table><tr><td>&nbsp;</td></tr></table></div><p>Hello</p>",
        # A picture that a font-size:0 or a line-height:0 does not hide: the frame shows it.
        "<table><tr><td style='font-size:0;line-height:0'><img src='cid:logo.png' alt='' "
        "width=600 height=80></td></tr></table>",
        "<img src='' style='display:none'><div style='display:none'><img src='data:,'></div>",
        # Drawn by no reader, and named by its own check (policy.invisible_in_content).
        "<div style='font-size:0'>&#8203;</div><p>Hello</p>",
    ],
)
def test_a_spacer_its_own_style_hides_holds_no_hidden_text(html):
    assert reader_looks(html) == []


def test_a_zero_width_space_in_a_spacer_is_named_by_its_own_check():
    assert invisible_in_content(
        subject="s", text="t", html="<div style='font-size:0'>&#8203;</div>"
    ) == {"html": "U+200B ZERO WIDTH SPACE"}


# Words an inline style hides, however the element holds them: a reader that ignores the style
# (an inbox preview, a screen reader, Outlook for display:none) still gets them.
@pytest.mark.parametrize(
    "html",
    [
        '<div style="display:none;max-height:0;overflow:hidden">Your account is locked</div>',
        "<p>Hi<span style='font-size:0'>Pay to IBAN XX00 1234</span></p>",
        "<div style='display:none'><table><tr><td><p>&nbsp;<b>Pay now</b></p></td></tr></table>"
        "</div>",
        "<img src='data:,' alt='Pay to IBAN XX00 1234' style='display:none'>",
        "<div style='font-size:0'><img src='data:,' alt='Pay to XX00'></div>",
        "<div style='font-size:0' title='Pay to XX00'></div>",
        # A picture a display:none hides (which may be one of words): Outlook for Windows
        # ignores display:none; a font-size:0 hides no picture, and the frame shows it.
        "<img src='data:image/png;base64,iVBORw0KGgo=' style='display:none'>",
        "<div style='display:none'><img src='cid:pay-to.png' width=600 height=80></div>",
        "<div style='max-height:0;overflow:hidden'><p><img srcset='cid:pay-to.png 2x'></p></div>",
        "<span style='display:none'><input type=image src='cid:pay-to.png'></span>",
        # What a screen reader reads of an element besides its text and label.
        "<span role='img' aria-roledescription='Pay to XX00' style='font-size:0'></span>",
        "<span role='slider' aria-valuetext='Pay to XX00' style='font-size:0'></span>",
        "<div role='textbox' aria-placeholder='Pay to XX00' style='font-size:0'></div>",
        "<span role='img' aria-braillelabel='Pay to XX00' style='font-size:0'></span>",
        "<table summary='Pay to XX00' style='font-size:0'><tr><td>&nbsp;</td></tr></table>",
        "<table><tr><th abbr='Pay to XX00' style='font-size:0'>&nbsp;</th></tr></table>",
        "<div style='opacity:0'>&nbsp;</div>Hello<div style='opacity:0'>Pay</div>",
        "<div style='display:none'>&nbsp;&zwnj;</div>",
        "<div style='display:none'>&nbsp;&amp;</div>",
        "<div style='display:none'>&nbsp;<!--[if mso]>Pay<![endif]--></div>",
        "<svg><text style='opacity:0'><![CDATA[Pay to XX00]]></text></svg>",
        "<div style='display:none'><textarea></div></textarea>Pay to XX00</div>",
        "<span style='font-size:0'>&nbsp;</b>Pay to XX00",
        "<div style='display:none'>&nbsp;</div ><div style='display:none'>x",
        "<body style='font-size:0'><p>Pay</p>",
        # A close tag a browser ignores: the element goes on, holding what follows.
        "<div style='display:none'>&nbsp;<table><tr><td></div>Pay to XX00</td></tr></table></div>",
        "<span style='font-size:0'>&nbsp;<div></span>Pay to XX00</div></span>",
        "<p style='display:none'>&nbsp;<button></p>Pay to XX00</button></p>",
        "<form style='display:none'><div>&nbsp;</form>Pay to XX00</div>",
        # An <annotation-xml> of HTML holds HTML elements: a </math> in one of them is ignored.
        "<math style='display:none'><annotation-xml encoding='text/html'><div>&nbsp;</math>"
        "Pay to XX00</div>",
        # Formatting a browser opens again after a close tag (its list of active formatting).
        "<p><b style='display:none'>&nbsp;</p><p>Pay to XX00</p>",
        "<b style='display:none'><p><b>&nbsp;</p>&nbsp;</b>Pay to XX00</b>",
        "<div style='display:none'>&nbsp;<p><b style='font-size:0'></p></div>Pay to XX00",
        # The inline-block gap fix: whether the child's own font size shows its words depends on
        # where a browser ends the child, which only drawing it tells.
        "<div style='font-size:0'><div style='display:inline-block;font-size:16px'>Hello</div>"
        "</div>",
        # A tag read only by a browser: a "<div>" in an <svg>'s <style> leaves the <svg>.
        "<svg><style><div style='font-size:0'>Pay to XX00</div></style></svg>",
        # A ">" in an attribute before the style.
        "<div title='>' style='display:none'>Pay to XX00</div>",
        '<div style="font-family:&quot;Arial&quot;;display:none">Pay to XX00</div>',
    ],
)
def test_words_an_inline_style_hides_are_hidden_text(html):
    assert "hidden_text" in reader_looks(html)


@pytest.mark.parametrize(
    ("html", "words"),
    [
        ("<!-- a --!> b --> c", "b --> c"),
        ("<!-- a --> b --!> c", "b --!> c"),
        ("<!--> a", "a"),
        ("<!---> a", "a"),
        ("<!-- a -- > b --!> c", "c"),
        ("<!-- never closed --", ""),
    ],
)
def test_a_comment_ends_where_a_browser_ends_it(html, words):
    assert html_words(html) == words


# "</" before a letter that is not ASCII starts a bogus comment to the first ">", not an end tag
# (the WHATWG tokenizer's end tag open state): an attribute of what was read as an end tag hid
# what a browser shows after that ">".
def test_a_close_tag_of_a_letter_not_ascii_is_a_comment_to_its_first_close():
    body = '<div style="display:none">&nbsp;</\u00e9 x=">Pay to XX00">&nbsp;</div>'
    assert "hidden_text" in reader_looks(body)
    assert html_words('<p>Hi</\u00e9 x="> Pay to XX00"></p>') == 'Hi Pay to XX00">'


# A browser lower-cases a tag's name in ASCII only: "bloc\u212aquote" (a Kelvin sign) and "x\u00c0"
# are elements of their own, which a close tag of "blockquote" or "x\u00e0" does not end.
@pytest.mark.parametrize(
    "html",
    [
        "<blockquote style='display:none'>&nbsp;</bloc\u212aquote>Pay to XX00</blockquote>",
        "<bloc\u212aquote style='display:none'>&nbsp;</blockquote>Pay to XX00",
        "<x\u00c0 style='font-size:0'>&nbsp;</x\u00e0>Pay to XX00",
        # "</\u017ftyle>" (a long s) does not end a <style>: what follows is still its text.
        "<style></\u017ftyle><xmp></style><span title='>' style='display:none'>Pay to XX00</span>"
        "</xmp>",
    ],
)
def test_a_tag_name_is_lower_cased_in_ascii_only(html):
    assert "hidden_text" in reader_looks(html)


# A hiding style attribute that the hidden-text reading did not read as one of a tag it followed
# warns, wherever it is written: where that reading takes text for markup a browser does not
# (a <noscript>'s content, which a mail client without scripts parses; an <svg>'s <title>; a
# CDATA section in an <svg>, which ends at "]]>"), a ">" before the style does not hide it.
@pytest.mark.parametrize(
    "html",
    [
        "<noscript><span title='>' style='display:none'>Pay to XX00</span></noscript>",
        "<svg><title><span title='>' style='display:none'>Pay to XX00</span></title></svg>",
        "<svg><![CDATA[ > <textarea> ]]></svg>"
        "<span title='>' style='display:none'>Pay to XX00</span></textarea>",
        "<noscript><p title='<' style=\"display:none\">Pay to XX00</p></noscript>",
        '<noscript><p>style="</p><p style="display:none">Pay to XX00</p></noscript>',
    ],
)
def test_a_hiding_style_attribute_not_read_as_a_tag_warns_wherever_it_is(html):
    assert "hidden_text" in reader_looks(html)


# Hiding CSS the frame applies and other readers ignore, beyond display:none and font-size:0: a
# font shorthand of no size, a scale, a translate, content-visibility, a filter or a mask, a
# colour of (next to) no alpha however written, a font size tiny in a relative unit, an offset
# that moves the text far off, letters drawn on top of each other, a line clamp, a value
# computed from a custom property, and the vendor-prefixed spellings Chromium applies.
@pytest.mark.parametrize(
    "declaration",
    [
        "font:0/0 a",
        "font: italic bold 0px/0 Arial, sans-serif",
        "font:1px/1px Arial",
        "font: calc(0px) a",
        "scale:0",
        "scale: 1 0",
        "translate: -9999px",
        "translate:0 -9999px",
        "rotate:90deg",
        "content-visibility:hidden",
        "filter:opacity(0)",
        "filter: blur(20px)",
        "-webkit-filter:opacity(0)",
        "-webkit-transform:scale(0)",
        "-webkit-clip-path:inset(50%)",
        "-webkit-mask-image:linear-gradient(transparent,transparent)",
        "mask:linear-gradient(transparent,transparent)",
        "mix-blend-mode:screen",
        "color:#0000",
        "color:#00000000",
        "color:#FFFFFF05",
        "color:rgb(0 0 0 / 0)",
        "color: rgb(0 0 0 / 0%)",
        "color:rgba(0,0,0,0%)",
        "color:rgba(0, 0, 0, .05)",
        "color:hsl(0 0% 0% / 0)",
        "color:hwb(0 0% 0% / none)",
        "color:oklch(0 0 0 / 0)",
        "color: color(srgb 0 0 0 / 0)",
        "color: rgb(0 0 0 /" + " " * 200 + "0)",
        "color:color-mix(in srgb, red 0%, transparent)",
        "font-size:0.1vw",
        "font-size:.5vmin",
        "font-size:0.9dvh",
        "font-size:5%",
        "font-size:0.1ex",
        "font-size:0.2ch",
        "font-size:0.5mm",
        "font-size:1e-9px",
        "font-size:0e5px",
        "font-size:-0",
        "font-size:calc(16px - 16px)",
        "font-size:clamp(0px,0px,0px)",
        "font-size:var(--s)",
        "--h:none;display:var(--h)",
        "position:relative;left:-9999px",
        "position:relative;top:-9999px",
        "margin-left:-5000px",
        "margin:0 0 0 -9999px",
        "margin-inline-start:-100em",
        "inset-inline-start:-9999px",
        "left:9999px",
        "padding-left:10000px;overflow:hidden",
        "text-indent:100%;white-space:nowrap;overflow:hidden",
        "text-indent:9999px",
        "letter-spacing:-9999px",
        "letter-spacing:-1em",
        "max-block-size:0;overflow:hidden",
        "inline-size:0;overflow:hidden",
        "display:-webkit-box;-webkit-box-orient:vertical;-webkit-line-clamp:1;overflow:hidden",
    ],
)
def test_words_hidden_by_less_known_css_are_hidden_text(declaration):
    inline = f"<p>Hi</p><div style='{declaration}'>Hello<br>Pay to IBAN XX00 1234</div>"
    rule = f"<style>.x{{{declaration}}}</style><p class=x>Pay to IBAN XX00 1234</p>"

    assert "hidden_text" in reader_looks(inline)
    assert "hidden_text" in reader_looks(rule)


# What ordinary templates write, which shows every reader the same words.
@pytest.mark.parametrize(
    "declaration",
    [
        "font: 14px/20px Arial, sans-serif",
        "font: 300 16px/1.4 'Helvetica Neue'",
        "font-size:80%",
        "font-size:1.2vw",
        "font-size:0.9em",
        "color:rgba(0,0,0,.87)",
        "color:rgb(0, 0, 0)",
        "color:rgb(0 0 0 / 50%)",
        "color:#000",
        "color:#0000ff",
        "color:#000000ff",
        "color:hsl(0 0% 0%)",
        "margin:0 auto",
        "margin-left:-2px",
        "margin-top:-20px",
        "left:10px",
        "text-indent:2em",
        "letter-spacing:-1px",
        "letter-spacing:-0.02em",
        "width:20%",
        "padding:0 10px",
    ],
)
def test_css_that_shows_its_words_is_not_hidden_text(declaration):
    inline = f"<p>Hi</p><div style='{declaration}'>Pay to IBAN XX00 1234</div>"
    rule = f"<style>.x{{{declaration}}}</style><p class=x>Pay to IBAN XX00 1234</p>"

    assert reader_looks(inline) == []
    assert reader_looks(rule) == []


# Elements a browser, and so the frame, does not show (or shows only in place of what it
# holds), whose words a reader that does not draw them gets: ruby's parentheses, a closed
# <dialog>, a <datalist>'s options, MathML's <annotation>, the fallback of an <audio>, a
# <video>, an <object> or a <canvas>, a <noembed> or a <noframes>; wherever they are written.
@pytest.mark.parametrize(
    "html",
    [
        "<ruby>\u6f22<rp>Pay to IBAN XX00 1234</rp><rt>kan</rt></ruby>",
        "<dialog><p>Pay to IBAN XX00 1234</p></dialog><p>Hello</p>",
        "<DIALOG open=''x>&nbsp;</DIALOG><dialog title=x>Pay to XX00</dialog>",
        "<input list=l><datalist id=l><option value='Pay to XX00'></option></datalist>",
        "<datalist><option>Pay to XX00</option></datalist>",
        "<math><semantics><mi>x</mi><annotation encoding='text/plain'>Pay to XX00</annotation>"
        "</semantics></math>",
        "<video src='cid:v.mp4'>Pay to IBAN XX00 1234</video>",
        "<audio><source src='cid:a.mp3'><p>Pay to XX00</p></audio>",
        "<object data='cid:x.pdf'><p>Pay to XX00</p></object>",
        "<canvas width=10 height=10>Pay to XX00</canvas>",
        "<video>&nbsp;<img src='cid:pay-to.png'></video>",
        "<noembed>Pay to XX00</noembed>",
        "<noframes><p>Pay to XX00</p></noframes>",
        # Where the hidden-text reading reads no tags: a mail client without scripts does.
        "<noscript><span title='>'><rp>Pay to XX00</rp></span></noscript>",
    ],
)
def test_words_of_an_element_a_browser_does_not_draw_are_hidden_text(html):
    assert "hidden_text" in reader_looks(html)


@pytest.mark.parametrize(
    "html",
    [
        "<dialog open><p>Hello</p></dialog>",
        "<video src='cid:v.mp4' poster='cid:p.png' title='Our new office'></video><p>Hello</p>",
        "<object data='cid:x.pdf'></object><p>Hello</p>",
        "<ruby>\u6f22<rt>kan</rt></ruby><p>Hello</p>",
        "<math><mi>x</mi></math><p>Hello</p>",
    ],
)
def test_an_element_a_browser_does_not_draw_without_words_is_not_hidden_text(html):
    assert reader_looks(html) == []


# A height or width computed to (next to) nothing: a calc(), min(), max() or clamp() whose value
# is at most 3 px whatever the box (a negative one is taken as 0), the same as "height:0".
@pytest.mark.parametrize(
    "declaration",
    [
        "height:calc(0px);overflow:hidden",
        "max-height:calc(0 * 1px);overflow:hidden",
        "max-height:calc(10px - 20px);overflow:hidden",
        "height:calc(100% * 0);overflow:hidden",
        "height:calc(1px - 100vw);overflow:hidden",
        "max-height:min(0px, 100%);overflow:hidden",
        "width:clamp(0px, 0px, 600px);overflow:hidden",
        "max-width:calc((2px - 2px) * 5);overflow:hidden",
        "max-height:calc(100px / 1000);overflow:hidden",
        "-webkit-max-inline-size:CALC(0PX);overflow:hidden",
        # Nested past what is read (32): Chromium computes calc() nested to 100 deep, so a
        # nesting no template writes is taken as the most it can hide, not as unreadable.
        "height:" + "calc(" * 40 + "1px" + ")" * 40 + ";overflow:hidden",
        "height:" + "min(" * 500 + "1px" + ")" * 500 + ";overflow:hidden",
    ],
)
def test_a_size_computed_to_nothing_hides_its_words(declaration):
    inline = f"<p>Hi</p><div style='{declaration}'>Pay to IBAN XX00 1234</div>"
    rule = f"<style>.x{{{declaration}}}</style><p class=x>Pay to IBAN XX00 1234</p>"

    assert "hidden_text" in reader_looks(inline)
    assert "hidden_text" in reader_looks(rule)


@pytest.mark.parametrize(
    "declaration",
    [
        "width:calc(100% - 40px)",
        "max-width:min(600px, 100%)",
        "height:calc(2em + 10px)",
        "width:clamp(280px, 50%, 600px)",
        "max-height:calc(100vh - 20px)",
    ],
)
def test_a_size_computed_to_something_shows_its_words(declaration):
    assert reader_looks(f"<div style='{declaration}'>Pay to IBAN XX00 1234</div>") == []


# SVG that a browser does not draw, whose words a screen reader, an inbox preview or a client
# without SVG gets: a <desc>, <metadata>, what <defs>, a <symbol>, a <clipPath>, a <mask> or a
# <pattern> holds, an <svg>'s <title>; a text its presentation attributes hide; a document in an
# <iframe>'s srcdoc (the frame shows the tag as text, a client that draws frames the document).
@pytest.mark.parametrize(
    "html",
    [
        "<svg><desc>Pay to IBAN XX00 1234</desc></svg>",
        "<svg><metadata>Pay to IBAN XX00 1234</metadata></svg>",
        "<svg><defs><text x='0' y='10'>Pay to IBAN XX00 1234</text></defs></svg>",
        "<svg><symbol id='s'><text>Pay to IBAN XX00 1234</text></symbol></svg>",
        "<svg><clipPath id='c'><text>Pay to IBAN XX00 1234</text></clipPath></svg>",
        "<svg><mask id='m'><text>Pay to IBAN XX00 1234</text></mask></svg>",
        "<svg><title>Pay to IBAN XX00 1234</title><rect width='10' height='10'/></svg>",
        "<svg viewBox='0 0 9 9'><g><title>Pay to XX00</title></g></svg>",
        "<svg><text display='none'>Pay to IBAN XX00 1234</text></svg>",
        "<svg><text visibility='hidden'>Pay to IBAN XX00 1234</text></svg>",
        "<svg><text opacity='0'>Pay to IBAN XX00 1234</text></svg>",
        "<svg><text font-size='0'>Pay to IBAN XX00 1234</text></svg>",
        "<iframe srcdoc='<p>Pay to IBAN XX00 1234</p>'></iframe>",
        "<iframe title='>' srcdoc=\"&lt;p&gt;Pay to XX00\"></iframe>",
    ],
)
def test_svg_and_frame_text_the_frame_does_not_draw_is_hidden_text(html):
    assert "hidden_text" in reader_looks(html)


@pytest.mark.parametrize(
    "html",
    [
        "<svg width='20' height='20'><defs><linearGradient id='g'><stop offset='0' "
        "stop-color='#fff'/></linearGradient></defs><rect fill='url(#g)'/></svg><p>Hello</p>",
        "<svg><text x='0' y='10' font-size='14'>Hello</text></svg>",
        "<html><head><title>Our spring news</title></head><body><p>Hello</p></body></html>",
        "<svg><title></title><desc> </desc></svg><p>Hello</p>",
    ],
)
def test_svg_that_draws_its_words_is_not_hidden_text(html):
    assert reader_looks(html) == []


# Words drawn in (next to) the colour behind them: the frame shows the reviewer a blank, an inbox
# preview, a screen reader or a client that drops the colours gives the customer the words.
@pytest.mark.parametrize(
    "html",
    [
        "<p>Hi</p><div style='color:#fff;background:#fff'>Pay to IBAN XX00 1234</div>",
        "<div style='background-color:#ffffff;color:#FFF'>Pay to IBAN XX00 1234</div>",
        "<table><tr><td bgcolor='#ffffff'><span style='color:#fff'>Pay to XX00</span></td></tr>"
        "</table>",
        "<table bgcolor=white><tr><td><font color=#FFFFFF>Pay to XX00</font></td></tr></table>",
        "<div style='background-color:white'><p style='color:WHITE'>Pay to XX00</p></div>",
        "<div style='background:rgb(255, 255, 255)'><p style='color:#ffffff'>Pay to XX00</p></div>",
        "<div style='background:#fff'><p style='color:hsl(0 0% 100%)'>Pay to XX00</p></div>",
        "<div style='background:#fff'><p style='color:#fefefe'>Pay to XX00</p></div>",
        "<div style='background:#fff url(cid:x.png) no-repeat'><b style='color:#fff'>Pay</b></div>",
        "<body style='background:#000'><p style='color:black'>Pay to XX00</p></body>",
        "<div style='background:#06c'><p style='color:rgba(0, 102, 204, .9)'>Pay to XX00</p></div>",
        "<div style='-webkit-text-fill-color:#fff;background:#fff'><span style='color:#000'>"
        "Pay to XX00</span></div>",
        "<p style='color:#fff'>Pay to XX00</p>",
        # A cell a browser ends at the next one: the words are on the table's white.
        "<table bgcolor='#ffffff'><tr><td bgcolor='#0000ff'>Hi<td><span style='color:#fff'>"
        "Pay to XX00</span></table>",
    ],
)
def test_words_in_the_colour_behind_them_are_hidden_text(html):
    assert "hidden_text" in reader_looks(html)


@pytest.mark.parametrize(
    "html",
    [
        "<div style='background:#fff'><a href='https://example.com' style='background:#06c;"
        "color:#fff'>Buy now</a></div>",
        "<table bgcolor='#ffffff'><tr><td bgcolor='#0066cc' style='color:#ffffff'>Buy</td></tr>"
        "</table>",
        "<div style='background:#fff;color:#fff'><a href='https://example.com'>Buy</a></div>",
        "<div style='background:#333'><p style='color:#fff'>Hello</p></div>",
        "<p style='color:#eeeeee;background:#666'>Hello</p>",
        "<p style='color:#999999'>Hello</p>",
        # A rule may give what stands between a colour of its own, which only drawing tells.
        "<style>.btn{background:#06c}</style><div style='background:#fff;color:#fff'>"
        "<span class=btn>Buy</span></div>",
        "<table bgcolor='#ffffff'><tr><td bgcolor='#0000ff'>Hi</td><td bgcolor='#0000ff'>"
        "<span style='color:#fff'>Buy</span></td></tr></table>",
        "<div style='background:linear-gradient(#fff, #06c)'><p style='color:#fff'>Hi</p></div>",
    ],
)
def test_words_in_a_colour_unlike_what_is_behind_them_are_not_hidden_text(html):
    assert reader_looks(html) == []


# A custom property the body defines: var() takes one of the values written for it (or, where
# none reaches the element, its fallback or nothing), so it hides only where one of them does.
@pytest.mark.parametrize(
    "html",
    [
        "<style>:root{--brand:#0066cc}</style><p style='color:var(--brand)'>Hello</p>",
        "<div style='--brand:#0066cc'><p style='color:var( --brand )'>Hello</p></div>",
        "<style>:root{--brand:#0066cc} p{color:var(--brand)}</style><p>Hello</p>",
        "<style>:root{--gap:24px}</style><td style='padding:var(--gap, 16px)'>Hello</td>",
    ],
)
def test_a_custom_property_the_body_defines_is_read_as_its_values(html):
    assert reader_looks(html) == []


@pytest.mark.parametrize(
    "html",
    [
        "<style>:root{--brand:#0066cc}</style><p style='color:var(--undefined)'>Pay</p>",
        "<style>:root{--size:0}</style><p style='font-size:var(--size)'>Pay to XX00</p>",
        "<style>.a{--size:16px} .b{--size:0px}</style><p style='font-size:var(--size)'>Pay</p>",
        "<style>:root{--size:16px}</style><p style='font-size:var(--size, 0)'>Pay</p>",
        "<style>:root{--a:var(--b)}</style><p style='font-size:var(--a)'>Pay</p>",
        "<div style='--x:none'><p style='display:var(--x)'>Pay to XX00</p></div>",
        "<style>:root{--x:none} p{display:var(--x)}</style><p>Pay</p>",
    ],
)
def test_a_custom_property_that_may_hide_still_warns(html):
    assert "hidden_text" in reader_looks(html)


# A filter that changes only colours, and a small rotation, leave every word where the frame
# draws it, legible: a grey logo, a tilted "Sale" badge.
@pytest.mark.parametrize(
    "html",
    [
        "<p style='filter:grayscale(100%)'>Hello</p>",
        "<img src='cid:logo' alt='Our logo' style='-webkit-filter:grayscale(1);"
        "filter:grayscale(1)'>",
        "<style>img{filter:grayscale(1)}</style><p>Hello</p>",
        "<p style='filter:sepia(60%) saturate(1.2) hue-rotate(20deg)'>Hello</p>",
        "<p style='transform:rotate(-2deg)'>Hello</p>",
        "<div style='-webkit-transform:rotate(3deg);transform:rotate( 3deg ) !important'>Sale</div>",
        "<p style='rotate:-2deg'>Hello</p>",
        "<p style='transform:rotate(-0.05turn)'>Hello</p>",
    ],
)
def test_a_filter_of_colours_and_a_small_rotation_are_not_hidden_text(html):
    assert reader_looks(html) == []


@pytest.mark.parametrize(
    "html",
    [
        "<p style='transform:rotate(90deg)'>Pay to XX00</p>",
        "<p style='transform:rotateX(90deg)'>Pay to XX00</p>",
        "<p style='rotate:x 90deg'>Pay to XX00</p>",
        "<p style='transform:rotate(-2deg) translateX(-9999px)'>Pay to XX00</p>",
        "<p style='transform:rotate(var(--a))'>Pay to XX00</p>",
        "<p style='filter:grayscale(1) blur(8px)'>Pay to XX00</p>",
        "<p style='filter:grayscale(1) opacity(0)'>Pay to XX00</p>",
        "<p style='filter:grayscale(calc(1))'>Pay to XX00</p>",
        # Red on a green as light: the same grey once grayscale draws them.
        "<div style='background:#004c00'><p style='filter:grayscale(100%);color:#ff0000'>"
        "Pay to XX00</p></div>",
        "<div style='filter:grayscale(1)'><p style='color:#ff0000;background:#004c00'>"
        "Pay to XX00</p></div>",
    ],
)
def test_a_filter_or_transform_that_may_hide_still_warns(html):
    assert "hidden_text" in reader_looks(html)


# A <source> draws nothing of its own: its srcset picks the picture of its <picture>'s <img>,
# its src a video's frames. A hiding style on it hides nothing, a <picture> of sources without
# an <img> draws nothing, a video's source is no fallback.
@pytest.mark.parametrize(
    "html",
    [
        "<picture><source srcset='https://example.com/hero@2x.png 2x' style='display:none'>"
        "<img src='cid:hero' alt='Spring sale'></picture>",
        "<div style='display:none;max-height:0;overflow:hidden'><picture>"
        "<source srcset='https://example.com/hero@2x.png 2x'></picture></div><p>Hello</p>",
        "<video controls poster='data:,'><source src='https://example.com/tour.mp4' "
        "type='video/mp4'></video><p>Hello</p>",
        "<audio controls><source src='https://example.com/note.mp3'></audio><p>Hello</p>",
    ],
)
def test_a_source_that_draws_nothing_of_its_own_is_not_hidden_text(html):
    assert reader_looks(html) == []


@pytest.mark.parametrize(
    "html",
    [
        "<div style='display:none'><picture><source srcset='https://example.com/pay.png'>"
        "<img src='data:,'></picture></div>",
        "<picture style='display:none'><source srcset='https://example.com/pay.png'>"
        "<img src=''></picture>",
        "<div style='display:none'><video><source src='https://example.com/pay.mp4'></video></div>",
        "<video><source src='https://example.com/a.mp4'><img src='https://example.com/pay.png'>"
        "</video>",
        "<picture><source srcset='https://example.com/pay.png'><img src='data:,' "
        "style='display:none'></picture>",
        "<div style='font-size:0'><picture><source srcset='https://example.com/pay.png'>"
        "<img src='data:,' style='display:none'></picture></div>",
    ],
)
def test_a_source_that_gives_a_hidden_element_its_picture_still_warns(html):
    assert "hidden_text" in reader_looks(html)


# A wordless box that a browser paints over words before it (CSS 2.1 Appendix E: a positioned
# or inline-block box after the text of blocks), pulled up over them with a background, or a
# positioned box with a background, and words of a negative z-index under an element's
# background: the frame shows the reviewer the box, a client that drops the styles the words.
@pytest.mark.parametrize(
    "html",
    [
        "<p>Pay to IBAN XX00 1234</p><div style='position:relative;margin-top:-60px;"
        "height:60px;background:#fff'></div>",
        "<p>Pay to XX00</p><div style='display:inline-block;width:100%;margin-top:-3em;"
        "height:3em;background-color:#ffffff'>&nbsp;</div>",
        "<p>Pay to XX00</p><div style='position:relative;top:-40px;padding:20px;"
        "background:white'></div>",
        "<div style='position:relative'><p>Pay to XX00</p><div style='position:absolute;top:0;"
        "bottom:0;left:0;right:0;background:#fff'></div></div>",
        "<div style='background:#fff'><p style='position:relative;z-index:-1'>Pay to XX00</p>"
        "</div>",
        "<table><tr><td bgcolor='#ffffff'><span style='position:relative;z-index:-2'>Pay</span>"
        "</td></tr></table>",
    ],
)
def test_words_a_box_covers_are_hidden_text(html):
    assert "hidden_text" in reader_looks(html)


@pytest.mark.parametrize(
    "html",
    [
        "<p>Hello</p><div style='position:relative;margin-top:-4px;height:10px;"
        "background:#fff'></div>",
        # A block's background is painted before the text of the blocks before it.
        "<p>Hello</p><div style='margin-top:-100px;height:100px;background:#fff'></div>",
        # An overlapping card holds words of its own: what it covers is a header's padding.
        "<div style='background:#06c;color:#fff;padding:20px 20px 120px'>Spring news</div>"
        "<div style='position:relative;margin:-80px 20px 0;background:#fff;padding:20px'>"
        "<p>Hello</p></div>",
        "<div style='position:relative;z-index:-1'><p>Hello</p></div>",
        "<body style='background:#fff'><p style='position:relative;z-index:-1'>Hello</p></body>",
        "<div style='background:#fff;position:relative;z-index:0'><p style='position:relative;"
        "z-index:-1'>Hello</p></div>",
        "<p>Hello</p><div style='position:relative;margin-top:-60px;height:60px'></div>",
    ],
)
def test_a_box_that_covers_no_words_is_not_hidden_text(html):
    assert reader_looks(html) == []
