"""The sandbox's mailbox viewer: what each external recipient would have received."""

from __future__ import annotations

import json
from html import escape
from urllib.parse import quote

from .store import Store

STYLE = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d232b}
header{background:#1d232b;color:#fff;padding:12px 24px}
header a{color:#fff;text-decoration:none;font-weight:600}
main{max-width:960px;margin:24px auto;padding:0 24px}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{text-align:left;padding:8px 10px;border-bottom:1px solid #e3e6ea;vertical-align:top}
th{font-size:13px;color:#5a6472;font-weight:600}
article{background:#fff;border:1px solid #e3e6ea;border-radius:6px;margin:0 0 16px;padding:14px 18px}
article h2{font-size:17px;margin:0 0 6px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 10px;font-size:13px}
dt{color:#5a6472}dd{margin:0;word-break:break-all}
pre{white-space:pre-wrap;word-wrap:break-word;background:#f6f7f9;padding:10px;margin:0;font:13px/1.4 ui-monospace,monospace}
.muted{color:#5a6472}.tag{display:inline-block;background:#e8eef8;border-radius:3px;padding:0 6px;margin-right:4px;font-size:12px}
"""


def _layout(title: str, content: str) -> bytes:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>"
        '<header><a href="/_sandbox/">AgentMail sandbox</a> <span class=muted>'
        "&middot; recipients' mailboxes</span></header>"
        f"<main>{content}</main></body></html>"
    ).encode()


def index_page(store: Store) -> bytes:
    rows = store.query(
        "SELECT r.address, COUNT(*) AS n, MAX(l.at) AS last FROM ledger_recipients r "
        "JOIN ledger l ON l.id = r.ledger_id GROUP BY r.address ORDER BY last DESC"
    )
    if not rows:
        body = "<h1>Mailboxes</h1><p class=muted>No message has been sent yet.</p>"
        return _layout("Sandbox mailboxes", body)
    lines = "".join(
        f'<tr><td><a href="/_sandbox/mailboxes/{quote(r["address"], safe="@")}">'
        f"{escape(r['address'])}</a></td><td>{r['n']}</td><td>{escape(r['last'])}</td></tr>"
        for r in rows
    )
    body = (
        "<h1>Mailboxes</h1><table><thead><tr><th>Recipient</th><th>Messages</th>"
        f"<th>Last received</th></tr></thead><tbody>{lines}</tbody></table>"
    )
    return _layout("Sandbox mailboxes", body)


def mailbox_page(store: Store, address: str) -> bytes:
    rows = store.query(
        "SELECT l.* FROM ledger l JOIN ledger_recipients r ON r.ledger_id = l.id "
        "WHERE r.address = ? ORDER BY l.id DESC LIMIT 500",
        (address.lower(),),
    )
    items = []
    for row in rows:
        labels = "".join(f"<span class=tag>{escape(x)}</span>" for x in json.loads(row["labels"]))
        fields = [
            ("From", row["from_addr"]),
            ("To", ", ".join(json.loads(row["to_addrs"]))),
            ("Cc", ", ".join(json.loads(row["cc_addrs"]))),
            ("Time", row["at"]),
            ("Message-ID", row["message_id"]),
            ("In-Reply-To", row["in_reply_to"] or ""),
        ]
        meta = "".join(f"<dt>{k}</dt><dd>{escape(v)}</dd>" for k, v in fields if v)
        if row["text_body"] is not None:
            text = row["text_body"]
        elif row["html_body"] is not None:
            text = "(HTML only)\n" + row["html_body"]
        else:
            text = ""
        items.append(
            f"<article><h2>{escape(row['subject'] or '(no subject)')}</h2>"
            f"<dl>{meta}<dt>Labels</dt><dd>{labels}</dd></dl><pre>{escape(text)}</pre></article>"
        )
    content = (
        f"<h1>{escape(address)}</h1><p class=muted>{len(rows)} message(s), newest first.</p>"
        + ("".join(items) or "<p class=muted>Nothing received.</p>")
    )
    return _layout(f"Mailbox {address}", content)
