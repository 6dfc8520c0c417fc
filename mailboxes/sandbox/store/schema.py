"""The sandbox's SQLite tables, one group per resource; `reset` wipes `WIPED_TABLES`."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS pods (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, pod_id TEXT UNIQUE NOT NULL,
    client_id TEXT UNIQUE, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS inboxes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, inbox_id TEXT UNIQUE NOT NULL, pod_id TEXT NOT NULL,
    client_id TEXT UNIQUE, doc TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS inboxes_pod ON inboxes (pod_id, seq);
CREATE TABLE IF NOT EXISTS api_keys (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, api_key_id TEXT UNIQUE NOT NULL,
    secret_hash TEXT UNIQUE NOT NULL, scope_type TEXT NOT NULL, pod_id TEXT, inbox_id TEXT,
    permissions TEXT, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, inbox_id TEXT NOT NULL, message_id TEXT NOT NULL,
    thread_id TEXT NOT NULL, direction TEXT NOT NULL, doc TEXT NOT NULL,
    UNIQUE (inbox_id, message_id));
CREATE INDEX IF NOT EXISTS messages_thread ON messages (thread_id, seq);
CREATE INDEX IF NOT EXISTS messages_id ON messages (message_id);
CREATE TABLE IF NOT EXISTS message_labels (
    inbox_id TEXT NOT NULL, label TEXT NOT NULL, message_seq INTEGER NOT NULL,
    PRIMARY KEY (inbox_id, label, message_seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS idempotency_keys (
    key TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, state TEXT NOT NULL, status INTEGER,
    body BLOB, completed_at REAL, failed_at REAL, created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, route TEXT NOT NULL,
    inbox_id TEXT NOT NULL, pod_id TEXT NOT NULL, message_id TEXT NOT NULL,
    thread_id TEXT NOT NULL, idempotency_key TEXT, from_addr TEXT NOT NULL,
    to_addrs TEXT NOT NULL, cc_addrs TEXT NOT NULL, bcc_addrs TEXT NOT NULL, subject TEXT,
    text_body TEXT, html_body TEXT, labels TEXT NOT NULL, in_reply_to TEXT,
    api_key_id TEXT, api_key_prefix TEXT);
CREATE INDEX IF NOT EXISTS ledger_key ON ledger (idempotency_key);
CREATE TABLE IF NOT EXISTS ledger_recipients (
    address TEXT NOT NULL, ledger_id INTEGER NOT NULL,
    PRIMARY KEY (address, ledger_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS ledger_attachments (
    ledger_id INTEGER NOT NULL, position INTEGER NOT NULL, attachment_id TEXT NOT NULL,
    filename TEXT, content_type TEXT, content_disposition TEXT, content BLOB NOT NULL,
    PRIMARY KEY (ledger_id, position)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS message_attachments (
    inbox_id TEXT NOT NULL, message_id TEXT NOT NULL, attachment_id TEXT NOT NULL,
    download_token TEXT UNIQUE NOT NULL, content BLOB NOT NULL,
    PRIMARY KEY (inbox_id, message_id, attachment_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, method TEXT NOT NULL,
    path TEXT NOT NULL, route TEXT, api_key_id TEXT, api_key_prefix TEXT, scope_type TEXT,
    status INTEGER NOT NULL, fault TEXT, idempotency_key TEXT, duration_ms REAL NOT NULL);
CREATE TABLE IF NOT EXISTS webhooks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, webhook_id TEXT UNIQUE NOT NULL, client_id TEXT UNIQUE,
    failures INTEGER NOT NULL DEFAULT 0, headers TEXT NOT NULL, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT UNIQUE NOT NULL, svix_id TEXT NOT NULL,
    event_type TEXT NOT NULL, inbox_id TEXT, pod_id TEXT, message_id TEXT, body TEXT NOT NULL,
    created_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS deliveries (
    id INTEGER PRIMARY KEY AUTOINCREMENT, webhook_id TEXT NOT NULL, event_id TEXT NOT NULL,
    svix_id TEXT NOT NULL, event_type TEXT NOT NULL, status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at REAL NOT NULL, last_status INTEGER,
    last_error TEXT);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_attempt_at);
CREATE TABLE IF NOT EXISTS delivery_attempts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, delivery_id INTEGER NOT NULL, webhook_id TEXT NOT NULL,
    svix_id TEXT NOT NULL, event_id TEXT NOT NULL, event_type TEXT NOT NULL,
    attempt INTEGER NOT NULL, at REAL NOT NULL, status_code INTEGER, error TEXT);
CREATE TABLE IF NOT EXISTS deleted_objects (
    kind TEXT NOT NULL, client_id TEXT NOT NULL, doc TEXT NOT NULL,
    PRIMARY KEY (kind, client_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS suppressions (
    address TEXT PRIMARY KEY, reason TEXT NOT NULL, created_at TEXT NOT NULL);
"""

WIPED_TABLES = (
    "pods",
    "inboxes",
    "api_keys",
    "messages",
    "message_labels",
    "idempotency_keys",
    "ledger",
    "ledger_recipients",
    "ledger_attachments",
    "message_attachments",
    "requests",
    "webhooks",
    "events",
    "deliveries",
    "delivery_attempts",
    "suppressions",
    "deleted_objects",
)
